//! Contract 3: a key that is being passivated or deleted is re-activated only after the old
//! actor's last store call finished. A message that arrives meanwhile is held; the next
//! activation loads what that call left (so its turn gets the next sequence number and no
//! `Conflict`), and the activation counter rises only once the old actor's task has ended.
//!
//! The old actor's last write is held open with `FaultyStore`'s gate while a call for the same
//! key arrives. Breakages these tests catch (each verified by hand):
//! - the lifecycle task goes on as soon as the actor is `Stopping`, without awaiting `post_stop`
//!   (`registry/lifecycle.rs`): the final flush in `post_stop` is still held when the next
//!   activation loads (`a_call_during_a_held_final_flush_loads_only_after_it`,
//!   `activations_rise_only_after_the_old_actor_has_ended`);
//! - a `Stopping` slot is dropped, so that the next message re-activates at once
//!   (`registry/slots.rs`): both the final flush and a queued delete are overtaken (all three
//!   tests).

mod support;

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::state::EventKind;
use turnstile::store::{FaultyStore, StoreCall};
use turnstile::{EchoAgent, Error, MemoryStore, Runtime, SessionKey};

fn runtime(store: &Arc<FaultyStore>) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
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

/// Brings `a` to the one place where its actor still writes after it stopped — `post_stop`'s
/// final flush — and holds that write at the gate.
///
/// `a` gets a `clear_context` and, right behind it in its mailbox, a passivation (the runtime
/// holds one slot, and a call for another key evicts the idle `a`). The clear's save fails,
/// and so does the flush before the actor stops; the one left for `post_stop` is held.
async fn hold_the_final_flush(rt: &Runtime, faulty: &FaultyStore, a: &SessionKey) {
    rt.call(a, "one").await.unwrap();
    faulty.fail_next_appends(2);
    faulty.hold_next(StoreCall::Append, 1);
    {
        // On a current-thread runtime nothing else runs between these two polls, so the
        // clear is in the mailbox before the passivation.
        let mut clear = pin!(rt.clear_context(a));
        assert!(futures::poll!(clear.as_mut()).is_pending());
        let other = rt.call(&key("held", "other"), "evicts a").await;
        assert!(matches!(other, Err(Error::AtCapacity { .. })), "{other:?}");
        let cleared = within(clear).await;
        assert!(matches!(cleared, Err(Error::Store { .. })), "{cleared:?}");
    }
    within(faulty.until_held(StoreCall::Append, 1)).await;
    assert_eq!(
        faulty.appends_failed(),
        2,
        "the clear and the stop flush failed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_during_a_held_final_flush_loads_only_after_it() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let rt = runtime(&faulty);
    let a = key("held", "flush");
    hold_the_final_flush(&rt, &faulty, &a).await;

    let call = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "two").await }
    });
    settle().await;
    assert_eq!(
        faulty.loads_of(&a),
        1,
        "no load while the old actor's final write is held"
    );
    assert!(
        !call.is_finished(),
        "the call waits for the next activation"
    );

    faulty.release(StoreCall::Append);
    let outcome = within(call).await.unwrap().expect("no Conflict, no error");
    assert_eq!(faulty.loads_of(&a), 2);
    let events = stored_events(faulty.inner().as_ref(), &a).await;
    assert_dense(&events);
    assert!(
        matches!(events[2].kind, EventKind::ContextCleared {}),
        "the final flush landed: {:?}",
        events[2].kind
    );
    assert_eq!(outcome.seq, 5, "the new turn follows the flushed marker");
    assert_eq!(events.len(), 5);
}

#[tokio::test(start_paused = true)]
async fn activations_rise_only_after_the_old_actor_has_ended() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let rt = runtime(&faulty);
    let a = key("held", "count");
    hold_the_final_flush(&rt, &faulty, &a).await;
    assert_eq!(rt.stats().activations, 1);

    let call = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "two").await }
    });
    settle().await;
    assert_eq!(
        rt.stats().activations,
        1,
        "the old actor's task is still in post_stop: no new activation yet"
    );
    faulty.release(StoreCall::Append);
    within(call).await.unwrap().unwrap();
    assert_eq!(rt.stats().activations, 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_behind_a_held_delete_starts_a_fresh_session_after_it() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
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
