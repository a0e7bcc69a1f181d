//! Property: when a session's write is refused because another writer changed it, the session
//! reloads from the store — and its next turn sees everything the store now holds, including the
//! other writer's summary of older events, not the summary it had cached before. Breaking it:
//! keeping the cached summary across the reload hides the newer summary from the agent.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use support::harness::*;
use turnstile::context::ExtractiveSummarizer;
use turnstile::{Agent, AgentError, Error, InMemoryStore, Runtime, Store, TurnContext};

/// Records whether each turn saw a summary.
#[derive(Default)]
struct SummaryProbe {
    saw: Mutex<Vec<bool>>,
}

#[async_trait]
impl Agent for SummaryProbe {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        self.saw.lock().push(turn.summary().is_some());
        Ok(format!("reply to {}", turn.input()))
    }
}

fn runtime(agent: Arc<SummaryProbe>, store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store_arc(store)
        .with_window(4)
        .with_summarizer(ExtractiveSummarizer::default(), 4)
        .with_idle_ttl(Duration::from_secs(3600))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_turn_after_a_conflict_sees_the_other_writers_summary() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let (a_agent, b_agent) = (
        Arc::new(SummaryProbe::default()),
        Arc::new(SummaryProbe::default()),
    );
    let a = runtime(a_agent.clone(), store.clone());
    let b = runtime(b_agent, store.clone());
    let k = key("rui", "shared");

    // `a` holds the session live, with no summary yet.
    within(a.call(&k, "first")).await.unwrap();
    // `b` writes enough turns for a compaction, then lets go of the session.
    for i in 0..8 {
        within(b.call(&k, format!("from b {i}"))).await.unwrap();
    }
    eventually("b's compaction to be stored", || {
        futures::executor::block_on(store.load(&k, 0))
            .map(|loaded| loaded.record.is_some_and(|r| r.summary.is_some()))
            .unwrap_or(false)
    })
    .await;
    within(b.shutdown()).await;

    // `a`'s next write is based on a stale version: refused, and `a` reloads.
    let refused = within(a.call(&k, "stale")).await;
    assert!(
        matches!(refused, Err(Error::Store { .. })),
        "a write on a stale version is refused: {refused:?}"
    );
    within(a.call(&k, "after the reload")).await.unwrap();
    let saw = a_agent.saw.lock().clone();
    assert_eq!(
        saw.last(),
        Some(&true),
        "the turn after the reload sees the stored summary: {saw:?}"
    );
    a.shutdown().await;
}
