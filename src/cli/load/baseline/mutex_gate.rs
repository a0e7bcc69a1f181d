//! Baseline (a), the simplest alternative design: a map of `Arc<tokio::sync::Mutex<State>>`, one
//! lock per session. A turn takes the session's lock, loads the session on first use, runs the
//! agent and appends to the store, all under the lock, in the caller's own task.
//!
//! It has none of turnstile's bounds or policies: no capacity, no passivation (every session
//! stays in the map), no queue limit (callers simply wait on the lock), no overlap policy.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstile::{SessionKey, Store};

use super::super::target::{answered, Ack, Failure, Pending, Target, TargetCounters};
use super::sim::{AgentSim, SessionState, SimTurn};
use super::striped::Sessions;

/// One session: its state behind the lock, and the running turn's token beside it (an interrupt
/// must not wait for the lock the turn holds).
#[derive(Default)]
struct Gate {
    state: tokio::sync::Mutex<Option<SessionState>>,
    running: parking_lot::Mutex<Option<CancellationToken>>,
}

/// The mutex-gate design.
pub struct MutexGate {
    store: Arc<dyn Store>,
    sim: AgentSim,
    window: usize,
    sessions: Sessions<Gate>,
}

impl MutexGate {
    /// An empty map over `store`.
    pub fn new(store: Arc<dyn Store>, sim: AgentSim, window: usize) -> Self {
        Self {
            store,
            sim,
            window,
            sessions: Sessions::new(),
        }
    }

    fn gate(&self, key: &SessionKey) -> Arc<Gate> {
        self.sessions
            .shard(key)
            .lock()
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// One turn, in the caller's task: lock, load on first use, run, append.
    async fn turn(
        &self,
        gate: Arc<Gate>,
        key: &SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> Result<Ack, Failure> {
        let mut state = gate.state.lock().await;
        if state.is_none() {
            let loaded = SessionState::load(self.store.as_ref(), key, self.window)
                .await
                .map_err(|_| Failure::Store)?;
            self.sessions.activations.fetch_add(1, Ordering::Relaxed);
            *state = Some(loaded);
        }
        let Some(session) = state.as_mut() else {
            return Err(Failure::Other);
        };
        let cancel = CancellationToken::new();
        *gate.running.lock() = Some(cancel.clone());
        let turn = SimTurn {
            input,
            cancel: &cancel,
            first_chunk,
        };
        let result = session
            .run_turn(self.store.as_ref(), key, &self.sim, turn)
            .await;
        *gate.running.lock() = None;
        if result.is_err() {
            // The stored version is unknown after a failed append: reload next time.
            *state = None;
        }
        result
    }
}

impl Target for MutexGate {
    async fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> Pending<'a> {
        let gate = self.gate(key);
        let mut turn: Pending<'a> = Box::pin(self.turn(gate, key, input, first_chunk));
        // tokio's Mutex is fair: a `lock` queued by its first poll is served in that order. One
        // poll here gives the turn its place in the session's order before `send` returns.
        match futures::poll!(turn.as_mut()) {
            Poll::Ready(result) => answered(result),
            Poll::Pending => turn,
        }
    }

    async fn interrupt<'a>(&'a self, key: &'a SessionKey) -> bool {
        self.sessions
            .get(key)
            .is_some_and(|gate| self.sessions.interrupt(&gate.running))
    }

    fn live_sessions(&self) -> usize {
        self.sessions.len()
    }

    fn counters(&self) -> TargetCounters {
        self.sessions.counters()
    }

    async fn finish(&self) {
        // Every acknowledged turn is already in the store; nothing is buffered.
    }
}
