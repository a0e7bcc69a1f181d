//! Property (contract 14): a turn's reply is bounded by the runtime's `max_reply_bytes`
//! (default 2 MiB). An agent that streams past it is stopped there, and one that returns a
//! longer reply is cut: either way the caller gets `Interrupted(ReplyLimit)` with the first
//! `max_reply_bytes` bytes (cut at a character boundary), the history holds the same, and the
//! session goes on.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use support::harness::*;
use turnstile::state::{EventKind, InterruptReason, OutputStatus};
use turnstile::{Agent, AgentError, InMemoryStore, OutcomeKind, Runtime, Store, TurnContext};

/// The runtime's default bound.
const DEFAULT_MAX_REPLY_BYTES: usize = 2 << 20;

/// `stream`: emits 64 KiB chunks (of two-byte characters) without end, counting them;
/// `return`: returns 3 MiB at once; anything else: `ok`.
#[derive(Default)]
struct Talker {
    emitted: AtomicUsize,
}

#[async_trait]
impl Agent for Talker {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        match turn.input().as_str() {
            "stream" => {
                let chunk = "é".repeat(32 * 1024);
                loop {
                    turn.emit(chunk.clone()).await;
                    self.emitted.fetch_add(1, Ordering::SeqCst);
                }
            }
            "return" => Ok("y".repeat(3 << 20)),
            _ => Ok("ok".into()),
        }
    }
}

fn reply_limited(kind: &EventKind) -> Option<usize> {
    match kind {
        EventKind::AgentOutput {
            text,
            status: OutputStatus::Interrupted(InterruptReason::ReplyLimit),
            ..
        } => Some(text.len()),
        _ => None,
    }
}

#[tokio::test]
async fn an_endless_or_oversized_reply_is_cut_at_the_bound() {
    let agent = Arc::new(Talker::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("val", "long");

    let streamed = within(rt.call(&k, "stream")).await.unwrap();
    assert_eq!(
        streamed.kind,
        OutcomeKind::Interrupted(InterruptReason::ReplyLimit)
    );
    assert_eq!(streamed.output.len(), DEFAULT_MAX_REPLY_BYTES);
    assert_eq!(
        agent.emitted.load(Ordering::SeqCst),
        DEFAULT_MAX_REPLY_BYTES / (64 * 1024),
        "the emit that reached the bound never returned"
    );

    let returned = within(rt.call(&k, "return")).await.unwrap();
    assert_eq!(
        returned.kind,
        OutcomeKind::Interrupted(InterruptReason::ReplyLimit)
    );
    assert_eq!(returned.output.len(), DEFAULT_MAX_REPLY_BYTES);

    let next = within(rt.call(&k, "hi")).await.unwrap();
    assert_eq!(next.output, "ok", "the session goes on");
    let stored: Vec<usize> = stored_events(store.as_ref(), &k)
        .await
        .iter()
        .filter_map(|e| reply_limited(&e.kind))
        .collect();
    assert_eq!(stored, [DEFAULT_MAX_REPLY_BYTES, DEFAULT_MAX_REPLY_BYTES]);
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(
        view.record.schema_version, 3,
        "the new reason raised the head's version"
    );
}

#[tokio::test]
async fn a_smaller_bound_cuts_at_a_character_boundary() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(Talker::default())
        .store_arc(store.clone())
        .with_max_reply_bytes(1001)
        .build()
        .unwrap();
    let outcome = within(rt.call(&key("val", "short"), "stream"))
        .await
        .unwrap();
    assert_eq!(
        outcome.kind,
        OutcomeKind::Interrupted(InterruptReason::ReplyLimit)
    );
    assert_eq!(
        outcome.output.len(),
        1000,
        "é is two bytes: 1001 cuts one in half"
    );
}
