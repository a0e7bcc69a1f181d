//! Contracts 2 and 13 under faults: a failed or slow save means the turn is not acknowledged and
//! says why, and the session never shows it, answers from it or builds a later turn on it — a
//! write the store refused leaves nothing behind, and one whose outcome is unknown is read back
//! before anything builds on the session again. While the store cannot be read either, no agent
//! runs; nothing acknowledged is lost or silently reset.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use support::harness::*;
use turnstile::state::EventKind;
use turnstile::store::FaultyStore;
use turnstile::{
    Agent, AgentError, EchoAgent, Error, InMemoryStore, Runtime, SessionKey, Store, StoreError,
    TurnContext,
};

/// Echoes its input, and records for each turn the inputs its context held.
#[derive(Default)]
struct ContextAgent {
    seen: Mutex<HashMap<String, Vec<String>>>,
}

impl ContextAgent {
    /// The earlier inputs the turn for `input` saw in its context.
    fn context_of(&self, input: &str) -> Vec<String> {
        self.seen.lock().get(input).cloned().unwrap_or_default()
    }
}

#[async_trait]
impl Agent for ContextAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let history = turn
            .history()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::UserInput { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        self.seen.lock().insert(turn.input(), history);
        Ok(turn.input())
    }
}

async fn texts(store: &dyn Store, key: &SessionKey) -> Vec<String> {
    stored_inputs(store, key)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect()
}

/// A turn that ran and whose write the store did not acknowledge.
fn is_store_error(result: &Result<turnstile::Outcome, Error>) -> bool {
    matches!(result, Err(Error::Store { source, .. }) if matches!(**source, StoreError::Unavailable { .. }))
}

/// A turn refused before it ran: the session could not read what the store holds.
fn is_unreadable(result: &Result<turnstile::Outcome, Error>) -> bool {
    matches!(result, Err(Error::Activation { source, .. }) if matches!(**source, StoreError::Unavailable { .. }))
}

#[tokio::test(start_paused = true)]
async fn a_failed_save_is_not_acknowledged_shown_or_built_on() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let agent = Arc::new(ContextAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "faults");
    rt.call(&k, "one").await.unwrap();
    faulty.fail_next_appends(1);
    let refused = rt.call(&k, "two").await;
    assert!(is_store_error(&refused), "{refused:?}");
    let view = rt.state(&k).await.unwrap().unwrap();
    let shown: Vec<_> = view.events.iter().map(|e| e.seq).collect();
    assert_eq!(shown, [1, 2], "the failed turn is not shown");
    assert_eq!(view.unsaved, 2, "its events are held apart until read back");
    rt.call(&k, "three").await.unwrap();
    assert_eq!(
        agent.context_of("three"),
        ["one"],
        "the next turn never saw the unacknowledged one"
    );
    assert_eq!(texts(faulty.inner().as_ref(), &k).await, ["one", "three"]);
    assert_dense(&stored_events(faulty.inner().as_ref(), &k).await);
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(
        view.unsaved, 0,
        "read back: the failed write did not commit"
    );
}

#[tokio::test(start_paused = true)]
async fn a_save_whose_answer_was_lost_is_read_back_before_the_next_turn() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let agent = Arc::new(ContextAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "lost-answer");
    faulty.lose_next_answers(1);
    let unknown = rt.call(&k, "one").await;
    assert!(is_store_error(&unknown), "{unknown:?}");
    rt.call(&k, "two").await.unwrap();
    assert_eq!(
        agent.context_of("two"),
        ["one"],
        "the store had it: adopted once read back, and built on"
    );
    assert_eq!(texts(faulty.inner().as_ref(), &k).await, ["one", "two"]);
    assert_dense(&stored_events(faulty.inner().as_ref(), &k).await);
}

#[tokio::test(start_paused = true)]
async fn a_session_whose_save_failed_may_be_passivated_and_resumes_from_the_store() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(faulty.clone())
        .with_idle_ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    let k = key("zoe", "passivated");
    rt.call(&k, "one").await.unwrap();
    faulty.fail_next_appends(1);
    assert!(rt.call(&k, "two").await.is_err());
    // Nothing unacknowledged is held for a later write, so nothing keeps the session live.
    tokio::time::sleep(Duration::from_secs(5)).await;
    eventually("passivation", || rt.live_sessions() == 0).await;
    assert_eq!(rt.call(&k, "three").await.unwrap().seq, 4);
    assert_eq!(texts(faulty.inner().as_ref(), &k).await, ["one", "three"]);
}

#[tokio::test(start_paused = true)]
async fn a_session_that_cannot_be_loaded_fails_its_calls_and_keeps_its_data() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let store: Arc<dyn Store> = faulty.clone();
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .unwrap();
    let k = key("zed", "unloadable");
    rt.call(&k, "kept").await.unwrap();
    rt.shutdown().await;
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    faulty.fail_next_loads(1);
    let failed = rt.call(&k, "lost?").await;
    assert!(
        matches!(failed, Err(Error::Activation { .. })),
        "{failed:?}"
    );
    assert_eq!(rt.live_sessions(), 0, "a failed activation leaves no slot");
    assert_eq!(rt.call(&k, "again").await.unwrap().seq, 4, "history intact");
}

/// A long outage (writes and reads fail): the first turn runs and is not kept; from then on the
/// session cannot find out what became of it, so no turn runs its agent until the store answers
/// again. Memory stays bounded: one write held apart. Afterwards the history holds exactly the
/// turns acknowledged, in order.
#[tokio::test(start_paused = true)]
async fn an_outage_runs_no_agent_on_a_session_it_cannot_read_back() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let agent = Arc::new(RecordingAgent::with_latency(Duration::ZERO));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "outage");
    rt.call(&k, "before").await.unwrap();
    faulty.fail_next_appends(usize::MAX);
    faulty.fail_next_reads(usize::MAX);
    let refused = rt.call(&k, "t0").await;
    assert!(is_store_error(&refused), "t0 ran, not stored: {refused:?}");
    for i in 1..200 {
        let refused = rt.call(&k, format!("t{i}")).await;
        assert!(is_unreadable(&refused), "t{i} refused unrun: {refused:?}");
    }
    assert_eq!(
        agent.started_inputs(&k),
        ["before", "t0"],
        "no agent ran on a session whose last write is in doubt"
    );
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(view.unsaved, 2, "one write held apart, no more");
    faulty.fail_next_appends(0);
    faulty.fail_next_reads(0);
    rt.call(&k, "after").await.unwrap();
    assert_eq!(
        texts(faulty.inner().as_ref(), &k).await,
        ["before", "after"]
    );
    assert_dense(&stored_events(faulty.inner().as_ref(), &k).await);
}

/// The same when the session never goes idle: two callers keep a turn queued behind the running
/// one, and the queued turns are refused, without running, while the store cannot be read.
#[tokio::test(start_paused = true)]
async fn an_outage_under_a_steady_queue_runs_no_agent_either() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let agent = Arc::new(RecordingAgent::with_latency(Duration::from_millis(100)));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "busy-outage");
    rt.call(&k, "before").await.unwrap();
    faulty.fail_next_appends(usize::MAX);
    faulty.fail_next_reads(usize::MAX);
    let callers: Vec<_> = (0..2)
        .map(|c| {
            let (rt, k) = (rt.clone(), k.clone());
            tokio::spawn(async move {
                for i in 0..100 {
                    let refused = rt.call(&k, format!("c{c} t{i}")).await;
                    let failed = is_store_error(&refused) || is_unreadable(&refused);
                    assert!(failed, "{refused:?}");
                }
            })
        })
        .collect();
    for caller in callers {
        within(caller).await.unwrap();
    }
    let ran = agent.started_inputs(&k).len();
    assert_eq!(ran, 2, "only the first turn of the outage ran its agent");
    faulty.fail_next_appends(0);
    faulty.fail_next_reads(0);
    rt.call(&k, "after").await.unwrap();
    assert_eq!(
        texts(faulty.inner().as_ref(), &k).await,
        ["before", "after"]
    );
}
