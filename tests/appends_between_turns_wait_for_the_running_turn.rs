//! `Runtime::append_between_turns` waits for the running turn; at most 64 such appends wait per
//! session (the next is refused as busy, changing nothing), and a session deleted meanwhile
//! answers them `Deleted` without writing them.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::json;
use support::harness::{eventually, key, stored_events, within, GateAgent};
use turnstile::state::{EventKind, StateDelta};
use turnstile::{Entry, Error, InMemoryStore, Runtime, Store};

fn mood(value: &str) -> StateDelta {
    [("mood".to_owned(), json!(value))].into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_appends_are_bounded_written_in_order_and_dropped_by_a_delete() {
    let agent = Arc::new(GateAgent::default());
    let store = Arc::new(InMemoryStore::new());
    let runtime = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let session = key("u", "s");
    let held = tokio::spawn({
        let (runtime, session) = (runtime.clone(), session.clone());
        async move { runtime.call(&session, "hold").await }
    });
    eventually("the turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let mut waiting = Vec::new();
    for i in 0..64 {
        let note = Entry::Note(format!("edit {i}"));
        let mut edit =
            Box::pin(runtime.append_between_turns(&session, vec![note], mood(&i.to_string())));
        assert!(futures::poll!(&mut edit).is_pending(), "edit {i} waits");
        waiting.push(edit);
    }
    let refused = runtime
        .append_between_turns(
            &session,
            vec![Entry::Note("one too many".into())],
            mood("x"),
        )
        .await;
    assert!(matches!(refused, Err(Error::Busy { .. })), "{refused:?}");

    agent.gate.add_permits(1);
    within(held).await.unwrap().expect("the turn");
    let mut seqs = Vec::new();
    for edit in waiting {
        seqs.push(within(edit).await.expect("written"));
    }
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in the order sent: {seqs:?}"
    );
    let events = stored_events(store.as_ref() as &dyn Store, &session).await;
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Note { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 64, "the refused one left nothing: {notes:?}");
    assert!(!notes.contains(&"one too many"));
    let view = runtime.state(&session).await.unwrap().expect("the session");
    assert_eq!(view.record.state["mood"], "63", "the last edit wins");

    // Deleted while an append waits: it is answered `Deleted` and never written.
    let held = tokio::spawn({
        let (runtime, session) = (runtime.clone(), session.clone());
        async move { runtime.call(&session, "hold on").await }
    });
    eventually("the next turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 2
    })
    .await;
    let mut edit = Box::pin(runtime.append_between_turns(
        &session,
        vec![Entry::Note("too late".into())],
        mood("late"),
    ));
    assert!(futures::poll!(&mut edit).is_pending());
    assert!(runtime.delete(&session).await.expect("deleted"));
    let answer = within(edit).await;
    assert!(matches!(answer, Err(Error::Deleted { .. })), "{answer:?}");
    let _ = within(held).await.unwrap();
    assert!(stored_events(store.as_ref() as &dyn Store, &session)
        .await
        .is_empty());
}
