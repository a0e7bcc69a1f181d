//! Property: the entries a message brings (`CallOptions::preceding`) are written in the same
//! write as its turn, just before it, each carrying its request id; the turn's agent sees them;
//! a retry with the same request id writes them no more than its message; a message superseded
//! before it ran is written with them; more than the bound is refused before anything is
//! written; and `Runtime::find_request` reads the message back with them and its turn.

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use support::harness::*;
use turnstile::config::MAX_PRECEDING_ENTRIES;
use turnstile::state::{EventKind, Fate};
use turnstile::{
    Agent, AgentError, CallOptions, Entry, Error, InMemoryStore, OutcomeKind, OverlapPolicy,
    Runtime, Store, TurnContext,
};

/// Answers with what it saw: the history's last three texts (`-` for an event without one).
struct Seen;

#[async_trait]
impl Agent for Seen {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        if turn.input() == "slow" {
            // Runs until the newest message interrupts it.
            turn.cancellation().cancelled().await;
        }
        let history = turn.history();
        let last: Vec<&str> = history[history.len().saturating_sub(3)..]
            .iter()
            .map(|e| e.text().unwrap_or("-"))
            .collect();
        Ok(last.join("|"))
    }
}

fn brought() -> Vec<Entry> {
    vec![
        Entry::User("earlier".into()),
        Entry::Agent("an earlier reply".into()),
        Entry::ToolCall {
            call_id: "c1".into(),
            name: "add".into(),
            arguments: json!({"a": 1}),
        },
    ]
}

#[tokio::test]
async fn brought_entries_are_seen_written_before_their_message_and_never_twice() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(Seen)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("bea", "brought");
    let options = CallOptions::default()
        .with_request_id("r1")
        .with_preceding(brought());
    let outcome = within(rt.call_with(&k, "now", options.clone()))
        .await
        .unwrap();
    assert_eq!(
        outcome.output, "earlier|an earlier reply|-",
        "the agent saw them"
    );
    let again = within(rt.call_with(&k, "now", options)).await.unwrap();
    assert_eq!(again, outcome, "a retry is answered from the log");

    let events = stored_events(store.as_ref(), &k).await;
    let shown: Vec<(u64, Option<&str>, Option<&str>)> = events
        .iter()
        .map(|e| (e.seq, e.text(), e.request_id.as_deref()))
        .collect();
    assert_eq!(
        shown,
        [
            (1, Some("earlier"), Some("r1")),
            (2, Some("an earlier reply"), Some("r1")),
            (3, None, Some("r1")),
            (4, Some("now"), Some("r1")),
            (5, Some(outcome.output.as_str()), None),
        ],
        "written once, before the message"
    );

    let found = within(rt.find_request(&k, "r1")).await.unwrap().unwrap();
    assert_eq!(found.events.len(), 4, "the entries and the message");
    assert_eq!(found.message().seq, 4);
    match found.fate {
        Fate::Answered { turn, merged } => {
            assert!(!merged);
            assert_eq!((turn.seq, turn.inputs.as_slice()), (5, &[4][..]));
        }
        other => panic!("{other:?}"),
    }
    assert!(within(rt.find_request(&k, "nope")).await.unwrap().is_none());
}

#[tokio::test]
async fn a_superseded_message_is_written_with_its_entries() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(Seen)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("bea", "superseded");
    let running = {
        let rt = rt.clone();
        let k = k.clone();
        tokio::spawn(async move { rt.call(&k, "slow").await })
    };
    eventually("the slow turn runs", || rt.pending(&k) == 1).await;
    let latest = CallOptions::default().with_policy(OverlapPolicy::Latest);
    let superseded = {
        let options = CallOptions::default()
            .with_request_id("s")
            .with_preceding(vec![Entry::User("said before s".into())]);
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call_with(&k, "s", options).await })
    };
    eventually("s waits", || rt.pending(&k) == 2).await;
    let newest = within(rt.call_with(&k, "newest", latest)).await.unwrap();
    let superseded = within(superseded).await.unwrap().unwrap();
    assert_eq!(superseded.kind, OutcomeKind::Superseded);
    within(running).await.unwrap().unwrap();
    assert_eq!(newest.kind, OutcomeKind::Completed);
    let events = stored_events(store.as_ref(), &k).await;
    let texts: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .map(|e| (e.text(), e.request_id.as_deref()))
        .collect();
    let at = texts
        .iter()
        .position(|t| t.0 == Some("said before s"))
        .expect("the superseded message's entry is stored");
    assert_eq!(texts[at + 1], (Some("s"), Some("s")), "{texts:?}");
    assert_eq!(texts[at].1, Some("s"));
    let found = within(rt.find_request(&k, "s")).await.unwrap().unwrap();
    assert_eq!(found.fate, Fate::Superseded);
    assert_eq!(found.events.len(), 2);
}

#[tokio::test]
async fn too_many_entries_are_refused_and_nothing_is_written() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(Seen)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("bea", "too-many");
    let many = vec![Entry::User("x".into()); MAX_PRECEDING_ENTRIES + 1];
    let refused = rt
        .call_with(&k, "hi", CallOptions::default().with_preceding(many))
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::InvalidRequest(_)), "{refused:?}");
    assert!(refused
        .to_string()
        .contains(&MAX_PRECEDING_ENTRIES.to_string()));
    assert!(stored_events(store.as_ref(), &k).await.is_empty());
    let large = vec![Entry::ToolResult {
        call_id: "c".into(),
        output: "x".repeat(rt.config().max_input_bytes + 1),
    }];
    let refused = rt
        .call_with(&k, "hi", CallOptions::default().with_preceding(large))
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::TooLarge { .. }), "{refused:?}");
    assert!(stored_events(store.as_ref(), &k).await.is_empty());
}

#[tokio::test]
async fn entries_of_a_failed_turn_are_kept_and_the_failure_is_found_by_request_id() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(FlakyAgent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("bea", "failed");
    let options = CallOptions::default()
        .with_request_id("f")
        .with_preceding(vec![Entry::Agent("a reply the client kept".into())]);
    let failed = within(rt.call_with(&k, "fail", options)).await;
    assert!(
        matches!(failed, Err(Error::AgentFailed { .. })),
        "{failed:?}"
    );
    let found = within(rt.find_request(&k, "f")).await.unwrap().unwrap();
    assert_eq!(found.events[0].text(), Some("a reply the client kept"));
    match found.fate {
        Fate::Answered { turn, .. } => {
            assert!(matches!(
                turn.ending,
                turnstile::state::Ending::Failed { .. }
            ))
        }
        other => panic!("{other:?}"),
    }
    let kinds: Vec<bool> = stored_events(store.as_ref(), &k)
        .await
        .iter()
        .map(|e| matches!(e.kind, EventKind::TurnFailed { .. }))
        .collect();
    assert_eq!(kinds, [false, false, true]);
}
