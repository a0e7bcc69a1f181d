//! Contract 3: a key that is being passivated or deleted is re-activated only after the old
//! actor's last store call finished. A message that arrives meanwhile is held; the next
//! activation loads what the old actor left (so its turn gets the next sequence number and no
//! `Conflict`), and the activation counter rises only once the old actor's task has ended.
//!
//! The old actor's last store call — reading its events back for memory ingestion as it
//! passivates, or deleting the session — is held open with `FaultyStore`'s gate while a call for
//! the same key arrives. (A session has nothing left to flush when it stops: every event it
//! shows was acknowledged when it was made.) Breakages these tests catch:
//! - the supervising task goes on as soon as the actor is `Stopping`, without awaiting its stop
//!   (`registry/supervisor.rs`): the old actor's read is still held when the next activation
//!   loads (`a_call_during_a_held_last_read_loads_only_after_it`,
//!   `activations_rise_only_after_the_old_actor_has_ended`);
//! - a `Stopping` slot is dropped, so that the next message re-activates at once
//!   (`registry/slots.rs`): both the held read and a queued delete are overtaken (all three
//!   tests).

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::memory::InMemory;
use turnstile::store::{FaultyStore, StoreCall};
use turnstile::{EchoAgent, Error, InMemoryStore, Ingest, MemoryOptions, Runtime, SessionKey};

fn runtime(store: &Arc<FaultyStore>) -> Runtime {
    let memory = MemoryOptions {
        ingest: Ingest::OnPassivation,
        auto_recall: None,
    };
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .with_memory(InMemory::new(), memory)
        .with_capacity(1)
        .with_capacity_wait(Duration::ZERO)
        .build()
        .unwrap()
}

/// Lets every task run until all of them wait (time is paused, so this sleep ends only when
/// nothing else can run): a re-activation that was going to start early has started.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Brings `a` to the last store call its actor makes as it stops — reading its events back to
/// ingest them into memory — and holds that read at the gate: the runtime holds one slot, and
/// a call for another key evicts the idle `a`.
async fn hold_the_last_read(rt: &Runtime, faulty: &FaultyStore, a: &SessionKey) {
    rt.call(a, "one").await.unwrap();
    faulty.hold_next(StoreCall::ReadEvents, 1);
    let other = rt.call(&key("held", "other"), "evicts a").await;
    assert!(matches!(other, Err(Error::AtCapacity { .. })), "{other:?}");
    within(faulty.until_held(StoreCall::ReadEvents, 1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_call_during_a_held_last_read_loads_only_after_it() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = runtime(&faulty);
    let a = key("held", "read");
    hold_the_last_read(&rt, &faulty, &a).await;

    let call = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "two").await }
    });
    settle().await;
    assert_eq!(
        faulty.loads_of(&a),
        1,
        "no load while the old actor's last store call is held"
    );
    assert!(
        !call.is_finished(),
        "the call waits for the next activation"
    );

    faulty.release(StoreCall::ReadEvents);
    let outcome = within(call).await.unwrap().expect("no Conflict, no error");
    assert_eq!(faulty.loads_of(&a), 2);
    let events = stored_events(faulty.inner().as_ref(), &a).await;
    assert_dense(&events);
    assert_eq!(
        outcome.seq, 4,
        "the new turn follows the old actor's events"
    );
    assert_eq!(events.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn activations_rise_only_after_the_old_actor_has_ended() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = runtime(&faulty);
    let a = key("held", "count");
    hold_the_last_read(&rt, &faulty, &a).await;
    assert_eq!(rt.stats().activations, 1);

    let call = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "two").await }
    });
    settle().await;
    assert_eq!(
        rt.stats().activations,
        1,
        "the old actor is still stopping: no new activation yet"
    );
    faulty.release(StoreCall::ReadEvents);
    within(call).await.unwrap().unwrap();
    assert_eq!(rt.stats().activations, 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_behind_a_held_delete_starts_a_fresh_session_after_it() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let rt = runtime(&faulty);
    let a = key("held", "delete");
    rt.call(&a, "old").await.unwrap();
    faulty.hold_next(StoreCall::Delete, 1);
    let delete = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.delete(&a).await }
    });
    within(faulty.until_held(StoreCall::Delete, 1)).await;

    let call = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "after").await }
    });
    settle().await;
    assert_eq!(faulty.loads_of(&a), 1, "no load while the delete is held");
    assert_eq!(rt.stats().activations, 1);
    assert!(!call.is_finished());

    faulty.release(StoreCall::Delete);
    assert!(
        within(delete).await.unwrap().unwrap(),
        "the session existed"
    );
    let outcome = within(call).await.unwrap().expect("no Conflict, no error");
    assert_eq!(outcome.seq, 2, "a new, empty session");
    let inputs = stored_inputs(faulty.inner().as_ref(), &a).await;
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].0, "after");
    assert_dense(&stored_events(faulty.inner().as_ref(), &a).await);
    assert_eq!(rt.stats().activations, 2);
}
