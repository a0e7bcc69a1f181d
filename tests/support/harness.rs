//! Agents, stores and helpers for runtime tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use turnstile::state::{Event, EventKind, InputDisposition, Seq};
use turnstile::store::{ForwardingStore, LoadedSession};
use turnstile::{
    Agent, AgentError, CallOptions, Outcome, Runtime, SessionKey, Store, StoreError, TurnContext,
};

/// Sends `inputs` to one session from a new task, in this order (each enters the session's FIFO
/// before the next), and returns their results.
pub fn spawn_calls(
    rt: &Runtime,
    key: &SessionKey,
    inputs: &[&str],
    options: CallOptions,
) -> tokio::task::JoinHandle<Vec<turnstile::Result<Outcome>>> {
    let (rt, key) = (rt.clone(), key.clone());
    let inputs: Vec<String> = inputs.iter().map(|s| (*s).to_owned()).collect();
    tokio::spawn(async move {
        let calls = inputs
            .into_iter()
            .map(|input| rt.call_with(&key, input, options.clone()));
        futures::future::join_all(calls).await
    })
}

/// Longest any single wait in a test may take before it counts as a failure.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Polls `check` until it returns true, failing the test after `TIMEOUT`.
pub async fn eventually<F: FnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Retries `attempt` until it returns `Ok`, and returns that value; fails the test after
/// `TIMEOUT` naming `what` and the last `Err` (what was seen instead).
///
/// `pace` is the pause between attempts, for checks that ask another process (a request, a
/// query): polling those every millisecond would only load them. It paces the polling and is
/// never what the test waits for.
pub async fn eventually_ok<T, E, F, Fut>(what: &str, pace: Duration, attempt: F) -> T
where
    E: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    eventually_ok_within(what, TIMEOUT, pace, attempt).await
}

/// [`eventually_ok`] with a deadline of its own: `within` from now instead of `TIMEOUT`.
pub async fn eventually_ok_within<T, E, F, Fut>(
    what: &str,
    within: Duration,
    pace: Duration,
    mut attempt: F,
) -> T
where
    E: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match attempt().await {
            Ok(done) => return done,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; last seen: {seen:?}"
            ),
        }
        tokio::time::sleep(pace).await;
    }
}

/// Awaits `fut`, failing the test after `TIMEOUT`.
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, fut)
        .await
        .expect("operation did not finish within TIMEOUT")
}

pub fn key(user: &str, session: &str) -> SessionKey {
    SessionKey::new(user, session).expect("valid key")
}

/// Every event of a session, read from the store.
pub async fn stored_events(store: &dyn Store, key: &SessionKey) -> Vec<Event> {
    store
        .read_events(key, 1, usize::MAX)
        .await
        .expect("read events")
}

/// Waits until the store holds at least `at_least` events of the session (the store is asked
/// every millisecond), and returns them all; fails the test after `TIMEOUT`.
pub async fn eventually_stored(store: &dyn Store, key: &SessionKey, at_least: usize) -> Vec<Event> {
    let what = format!("{at_least} stored events of {key}");
    eventually_ok(&what, Duration::from_millis(1), || async {
        let events = stored_events(store, key).await;
        if events.len() >= at_least {
            Ok(events)
        } else {
            Err(format!("{} events", events.len()))
        }
    })
    .await
}

/// The texts of a session's user inputs, with their dispositions, read from the store.
pub async fn stored_inputs(store: &dyn Store, key: &SessionKey) -> Vec<(String, InputDisposition)> {
    stored_events(store, key)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserInput { text, disposition } => Some((text, disposition)),
            _ => None,
        })
        .collect()
}

/// Checks that sequence numbers are 1, 2, 3, … with no gap or repeat.
pub fn assert_dense(events: &[Event]) {
    let seqs: Vec<Seq> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<Seq> = (1..=events.len() as Seq).collect();
    assert_eq!(seqs, expected, "sequence numbers must be dense and ordered");
}

/// An agent that sleeps `latency`, echoes its input, and records per session whether two turns
/// ever overlapped and the order in which turns started.
#[derive(Default)]
pub struct RecordingAgent {
    pub latency: Duration,
    active: Mutex<HashMap<SessionKey, usize>>,
    pub overlaps: AtomicUsize,
    pub started: Mutex<HashMap<SessionKey, Vec<String>>>,
    pub max_concurrent: AtomicUsize,
    concurrent: AtomicUsize,
}

impl RecordingAgent {
    pub fn with_latency(latency: Duration) -> Self {
        Self {
            latency,
            ..Self::default()
        }
    }

    pub fn started_inputs(&self, key: &SessionKey) -> Vec<String> {
        self.started.lock().get(key).cloned().unwrap_or_default()
    }
}

#[async_trait]
impl Agent for RecordingAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let key = turn.key().clone();
        {
            let mut active = self.active.lock();
            let n = active.entry(key.clone()).or_default();
            if *n > 0 {
                self.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            *n += 1;
        }
        self.started
            .lock()
            .entry(key.clone())
            .or_default()
            .push(turn.input());
        let now = self.concurrent.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_concurrent.fetch_max(now, Ordering::SeqCst);
        // Decrement even when the turn is dropped at an await point.
        struct Leave<'a>(&'a RecordingAgent, SessionKey);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.concurrent.fetch_sub(1, Ordering::SeqCst);
                if let Some(n) = self.0.active.lock().get_mut(&self.1) {
                    *n -= 1;
                }
            }
        }
        let _leave = Leave(self, key);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        tokio::task::yield_now().await;
        Ok(format!("echo: {}", turn.input()))
    }
}

/// An agent that panics on the input "panic", fails on "fail", and echoes anything else.
pub struct FlakyAgent;

#[async_trait]
impl Agent for FlakyAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        match turn.input().as_str() {
            "panic" => panic!("the agent panicked on purpose"),
            "fail" => Err("the agent failed on purpose".into()),
            other => {
                turn.set("last", other.to_owned());
                Ok(format!("echo: {other}"))
            }
        }
    }
}

/// An agent whose turns for inputs starting with "hold" wait until the test lets them go
/// (one permit per turn), emitting one chunk first; other inputs are answered at once.
pub struct GateAgent {
    pub gate: tokio::sync::Semaphore,
    pub entered: AtomicUsize,
}

impl Default for GateAgent {
    fn default() -> Self {
        Self {
            gate: tokio::sync::Semaphore::new(0),
            entered: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl Agent for GateAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        turn.emit(format!("working on {}", turn.input())).await;
        if !turn.input().starts_with("hold") {
            return Ok(format!("done: {}", turn.input()));
        }
        self.entered.fetch_add(1, Ordering::SeqCst);
        let permit = self.gate.acquire().await.expect("gate open");
        permit.forget();
        Ok(format!("done: {}", turn.input()))
    }
}

/// Wraps a store and counts calls.
pub struct CountingStore {
    pub inner: Arc<dyn Store>,
    pub loads: AtomicU64,
    pub appends: AtomicU64,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            loads: AtomicU64::new(0),
            appends: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl ForwardingStore for CountingStore {
    fn forward_to(&self) -> &dyn Store {
        self.inner.as_ref()
    }
    fn name(&self) -> &'static str {
        "counting"
    }
    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(key, window).await
    }
    async fn append(
        &self,
        key: &SessionKey,
        base: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.inner.append(key, base, events).await
    }
}

/// A store as one runtime sees it: the same data, with leases of the test's own making (cut off,
/// stale, counted) in place of the store's.
pub struct LeasesView {
    pub inner: Arc<dyn Store>,
    pub leases: Arc<dyn turnstile::store::Leases>,
}

#[async_trait]
impl ForwardingStore for LeasesView {
    fn forward_to(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    fn leases(&self) -> Option<Arc<dyn turnstile::store::Leases>> {
        Some(self.leases.clone())
    }
}
