//! `delete` is ordered with the session's messages: the turn running when it arrives is
//! interrupted and, like every message waiting before it, answered `Deleted`; its data is
//! removed; and what is sent after it starts a new, empty session whose bookkeeping is exact (it
//! becomes idle and can be passivated).
//!
//! The turn ahead of the delete is held open by `GateAgent`, so it is certainly running when the
//! delete arrives (with an agent that answers at once it could finish first, and either answer
//! would pass). Breakage caught (verified by hand): a delete that records the running turn as
//! an interrupted turn and answers its caller `Ok` instead of `Deleted` (`session/live.rs`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::store::FaultyStore;
use turnstile::{EchoAgent, Error, InMemoryStore, Runtime, Store};

fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .with_idle_ttl(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn messages_after_a_delete_start_a_fresh_session() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(store.clone());
    let k = key("del", "fifo");
    rt.call(&k, "old").await.unwrap();
    rt.shutdown().await;
    // "hold …" turns wait for a permit the test never gives.
    let rt = Runtime::builder()
        .agent(GateAgent::default())
        .store_arc(store.clone())
        .with_idle_ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    // All four enter while the session is still activating, in this order.
    let (running, waiting, deleted, after) = within(async {
        tokio::join!(
            rt.call(&k, "hold before"),
            rt.call(&k, "hold waiting"),
            rt.delete(&k),
            rt.call(&k, "after"),
        )
    })
    .await;
    assert!(
        matches!(running, Err(Error::Deleted { .. })),
        "the running turn is interrupted and answered Deleted: {running:?}"
    );
    assert!(
        matches!(waiting, Err(Error::Deleted { .. })),
        "a waiting message is answered Deleted: {waiting:?}"
    );
    assert!(deleted.unwrap(), "the stored session existed");
    let after = after.unwrap();
    assert_eq!(after.seq, 2, "a new, empty session");
    let inputs = stored_inputs(store.as_ref(), &k).await;
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].0, "after");
    eventually("the new session to be idle", || rt.pending(&k) == 0).await;
    // Paused time past the 10 s idle TTL: the scenario, not a wait for the reaper.
    tokio::time::sleep(Duration::from_secs(30)).await;
    eventually("passivation", || rt.live_sessions() == 0).await;
}

#[tokio::test(start_paused = true)]
async fn a_live_or_absent_session_can_be_deleted() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(store.clone());
    let k = key("del", "live");
    rt.call(&k, "x").await.unwrap();
    assert!(rt.delete(&k).await.unwrap());
    assert!(rt.state(&k).await.unwrap().is_none());
    assert!(!rt.delete(&key("del", "never")).await.unwrap());
    assert_eq!(rt.live_sessions(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_session_that_cannot_be_loaded_can_still_be_deleted() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = runtime(faulty.clone());
    let k = key("del", "broken");
    rt.call(&k, "x").await.unwrap();
    rt.shutdown().await;
    let rt = runtime(faulty.clone());
    faulty.fail_next_loads(1);
    assert!(rt.delete(&k).await.unwrap());
    assert!(faulty.inner().load(&k, 5).await.unwrap().record.is_none());
}
