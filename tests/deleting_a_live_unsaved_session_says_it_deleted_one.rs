//! Property: `delete` tells the truth about a session that exists only in memory. A session whose
//! first turn is still running has nothing in the store yet; deleting it interrupts that turn
//! (answered `Deleted`) and reports `true` — a session was deleted — while deleting a session that
//! never existed reports `false`. Breaking it: answering with the store's view alone says
//! `false` for the live one.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use support::harness::*;
use turnstile::{Error, InMemoryStore, Runtime};

#[tokio::test(start_paused = true)]
async fn a_delete_of_a_running_never_stored_session_reports_a_deletion() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let k = key("lea", "fresh");
    let running = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold on").await }
    });
    eventually("the first turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(
        within(rt.delete(&k)).await.unwrap(),
        "a live session was deleted"
    );
    let answer = within(running).await.unwrap();
    assert!(matches!(answer, Err(Error::Deleted { .. })), "{answer:?}");
    assert!(rt
        .state(&k)
        .await
        .unwrap()
        .is_none_or(|view| view.events.is_empty()));

    let never = key("lea", "never");
    assert!(
        !within(rt.delete(&never)).await.unwrap(),
        "nothing to delete"
    );
    rt.shutdown().await;
}
