//! A message may carry a request id; a message whose id the session already accepted is answered
//! with the stored outcome and never runs or is stored again: right after, while the original
//! is still running, after passivation, after a store outage, and after an append whose outcome
//! was unknown (read back, not guessed).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use support::harness::{eventually, key, stored_inputs, within, GateAgent, TIMEOUT};
use turnstile::state::Event;
use turnstile::store::{FaultyStore, ForwardingStore};
use turnstile::{
    CallOptions, EchoAgent, Error, InMemoryStore, OutcomeKind, Runtime, SessionKey, Store,
    StoreError,
};

fn with_id(id: &str) -> CallOptions {
    CallOptions::default().with_request_id(id)
}

async fn inputs(store: &dyn Store, key: &SessionKey) -> Vec<String> {
    stored_inputs(store, key)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect()
}

fn echo_runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .expect("runtime")
}

/// The same id twice: the second call gets the first call's outcome (same seq, same output),
/// also from a new runtime after the first one drained; the log holds the message once.
#[tokio::test]
async fn a_retry_is_answered_from_the_log_also_after_passivation() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let k = key("alice", "retry");
    let rt = echo_runtime(store.clone());
    let first = within(rt.call_with(&k, "hello", with_id("req-1")))
        .await
        .expect("first");
    let again = within(rt.call_with(&k, "hello", with_id("req-1")))
        .await
        .expect("retry");
    assert_eq!(
        (again.kind, again.seq, &again.output),
        (first.kind, first.seq, &first.output)
    );
    within(rt.call_with(&k, "next", with_id("req-2")))
        .await
        .expect("another message");
    within(rt.drain(TIMEOUT)).await;

    let reopened = echo_runtime(store.clone());
    let late = within(reopened.call_with(&k, "hello", with_id("req-1")))
        .await
        .expect("retry after passivation");
    assert_eq!((late.kind, late.seq), (OutcomeKind::Completed, first.seq));
    assert_eq!(inputs(store.as_ref(), &k).await, ["hello", "next"]);
}

/// A retry that arrives while the original is still running waits for it and shares its answer;
/// the agent runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_message_in_flight_shares_its_answer() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let gate = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(gate.clone())
        .store_arc(store.clone())
        .build()
        .expect("runtime");
    let k = key("alice", "in-flight");
    let original = {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call_with(&k, "hold on", with_id("once")).await })
    };
    eventually("the original runs", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let retry = {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call_with(&k, "hold on", with_id("once")).await })
    };
    eventually("the retry reached the session", || rt.pending(&k) == 2).await;
    gate.gate.add_permits(1);
    let first = within(original).await.expect("task").expect("original");
    let second = within(retry).await.expect("task").expect("retry");
    assert_eq!((second.kind, second.seq), (first.kind, first.seq));
    assert_eq!(gate.entered.load(Ordering::SeqCst), 1, "the agent ran once");
    assert_eq!(inputs(store.as_ref(), &k).await, ["hold on"]);
}

/// The store fails the original's append: its caller gets an error, the session keeps the
/// turn; the retry writes it and gets its outcome. The log holds it once.
#[tokio::test]
async fn a_retry_after_a_store_outage_is_not_a_second_copy() {
    let memory: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let faulty = FaultyStore::new(memory.clone());
    let rt = echo_runtime(faulty.clone());
    let k = key("alice", "outage");
    within(rt.call(&k, "before")).await.expect("before");
    faulty.fail_next_appends(1);
    let failed = within(rt.call_with(&k, "important", with_id("pay-42"))).await;
    assert!(matches!(failed, Err(Error::Store { .. })), "{failed:?}");
    let retried = within(rt.call_with(&k, "important", with_id("pay-42")))
        .await
        .expect("the retry is answered once the store is back");
    assert_eq!(retried.kind, OutcomeKind::Completed);
    assert_eq!(retried.output, "important");
    assert_eq!(inputs(memory.as_ref(), &k).await, ["before", "important"]);
}

/// A store whose next append commits and then reports a timeout, as a Redis answer lost on
/// the way back would.
struct CommitsThenTimesOut {
    inner: Arc<dyn Store>,
    armed: AtomicBool,
}

#[async_trait]
impl ForwardingStore for CommitsThenTimesOut {
    fn forward_to(&self) -> &dyn Store {
        self.inner.as_ref()
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        let version = self.inner.append(key, base_version, events).await?;
        if self.armed.swap(false, Ordering::SeqCst) {
            return Err(StoreError::Unavailable {
                backend: "test",
                detail: "no answer within 2s".into(),
            });
        }
        Ok(version)
    }
}

/// An append whose answer was lost had committed: the next turn does not fail with a conflict
/// (there was no other writer), nothing is stored twice, and a retry of the unacknowledged
/// message gets its stored outcome.
#[tokio::test]
async fn an_append_with_an_unknown_outcome_is_read_back() {
    let memory: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let store = Arc::new(CommitsThenTimesOut {
        inner: memory.clone(),
        armed: AtomicBool::new(false),
    });
    let rt = echo_runtime(store.clone());
    let k = key("alice", "unknown");
    within(rt.call(&k, "one")).await.expect("one");
    store.armed.store(true, Ordering::SeqCst);
    let lost_answer = within(rt.call_with(&k, "two", with_id("two"))).await;
    assert!(lost_answer.is_err(), "the caller was told it failed");
    let three = within(rt.call(&k, "three"))
        .await
        .expect("no conflict: the unknown append is read back and adopted");
    assert_eq!(three.seq, 6);
    let retried = within(rt.call_with(&k, "two", with_id("two")))
        .await
        .expect("retry");
    assert_eq!((retried.kind, retried.seq), (OutcomeKind::Completed, 4));
    assert_eq!(inputs(memory.as_ref(), &k).await, ["one", "two", "three"]);
}

/// Request ids are checked: empty, too long or with spaces or control characters are refused
/// before anything runs.
#[tokio::test]
async fn malformed_request_ids_are_refused() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = echo_runtime(store.clone());
    let k = key("alice", "ids");
    for bad in [String::new(), "x".repeat(129), "a b".into(), "a\nb".into()] {
        let refused = rt.call_with(&k, "x", with_id(&bad)).await;
        assert!(
            matches!(refused, Err(Error::InvalidRequest(_))),
            "{bad:?}: {refused:?}"
        );
    }
    assert!(inputs(store.as_ref(), &k).await.is_empty());
}

/// A request id names one request: a message with the id of one already taken but another
/// fingerprint (it says something else) is refused with `RequestMismatch` — while the first
/// runs, and from the log after — never answered with the first's outcome nor run; a retry with
/// the same fingerprint, or with none, gets the first outcome; the log holds the message once.
#[tokio::test]
async fn a_retry_that_says_something_else_is_refused_not_answered() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .expect("runtime");
    let k = key("fay", "fingerprints");
    let first = with_id("req-f").with_fingerprint("aaaa");
    let running = {
        let (rt, k, first) = (rt.clone(), k.clone(), first.clone());
        tokio::spawn(async move { rt.call_with(&k, "hold on", first).await })
    };
    eventually("the first turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let other = with_id("req-f").with_fingerprint("bbbb");
    let refused = within(rt.call_with(&k, "hold on, but other", other.clone())).await;
    assert!(
        matches!(&refused, Err(Error::RequestMismatch { request_id, .. }) if request_id == "req-f"),
        "in flight: {refused:?}"
    );
    let same = {
        let (rt, k, first) = (rt.clone(), k.clone(), first.clone());
        tokio::spawn(async move { rt.call_with(&k, "hold on", first).await })
    };
    eventually("the retry waits with the first", || rt.pending(&k) == 2).await;
    agent.gate.add_permits(1);
    let original = within(running).await.unwrap().expect("the first outcome");
    assert_eq!(within(same).await.unwrap().expect("the retry's"), original);

    let refused = within(rt.call_with(&k, "other", other)).await;
    assert!(
        matches!(refused, Err(Error::RequestMismatch { .. })),
        "from the log: {refused:?}"
    );
    assert_eq!(
        within(rt.call_with(&k, "hold on", first))
            .await
            .expect("same"),
        original
    );
    let unmarked = within(rt.call_with(&k, "hold on", with_id("req-f"))).await;
    assert_eq!(unmarked.expect("no fingerprint: not compared"), original);
    assert_eq!(inputs(store.as_ref(), &k).await, ["hold on"]);
    assert_eq!(
        Error::RequestMismatch {
            key: k.clone(),
            request_id: "x".into()
        }
        .code(),
        "request_mismatch"
    );
    let bad = rt
        .call_with(&k, "x", with_id("req-g").with_fingerprint("not one"))
        .await;
    assert!(matches!(bad, Err(Error::InvalidRequest(_))), "{bad:?}");
}
