//! Contract 2: when `call` returns `Ok`, the store already holds the turn — with the memory store
//! and with the (fsync'ing) file store.
//!
//! Each turn's append is held at `FaultyStore`'s gate: the call must still be waiting while its
//! append is held, and its events must be in the store when it returns. A failed append is never
//! acknowledged. Breakages these tests catch (each verified by hand, in `session/live.rs`):
//! - the reply is sent before the append (the held append finds its caller already answered);
//! - an append's error is ignored (the failed turn is answered `Ok` with nothing stored).

mod support;

use std::pin::pin;
use std::sync::Arc;

use support::harness::*;
use support::stores::temp_file_store;
use turnstile::state::EventKind;
use turnstile::store::{FaultyStore, StoreCall};
use turnstile::{EchoAgent, Error, InMemoryStore, Runtime, Store};

/// Runs turns over `inner`, each with its append held until the test has seen the call wait.
async fn acknowledged_turns_are_stored(inner: Arc<dyn Store>) {
    let faulty = FaultyStore::new(inner);
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("carol", "durable");
    let turns = 5;
    for i in 0..turns {
        faulty.hold_next(StoreCall::Append, 1);
        let mut call = pin!(rt.call(&k, format!("turn {i}")));
        tokio::select! {
            biased;
            result = &mut call => panic!("turn {i} was answered before its append: {result:?}"),
            () = within(faulty.until_held(StoreCall::Append, 1)) => {}
        }
        // Had the reply been sent before the append started, it would be ready by now.
        assert!(
            futures::poll!(call.as_mut()).is_pending(),
            "turn {i} was answered while its append was held"
        );
        assert_eq!(
            stored_events(faulty.inner().as_ref(), &k).await.len(),
            2 * i,
            "nothing of turn {i} is stored yet"
        );
        faulty.release(StoreCall::Append);
        let outcome = within(call).await.expect("acknowledged");

        let events = stored_events(faulty.inner().as_ref(), &k).await;
        assert_eq!(
            events.len(),
            2 * (i + 1),
            "turn {i} is stored when acknowledged"
        );
        let answer = events
            .iter()
            .find(|e| e.seq == outcome.seq)
            .expect("the acknowledged output is stored");
        match &answer.kind {
            EventKind::AgentOutput { text, .. } => assert_eq!(text, &format!("turn {i}")),
            other => panic!("seq {} is not an output: {other:?}", outcome.seq),
        }
    }

    faulty.fail_next_appends(1);
    let failed = rt.call(&k, "not stored").await;
    assert!(
        matches!(failed, Err(Error::Store { .. })),
        "a turn whose append failed must not be acknowledged: {failed:?}"
    );
    assert_eq!(
        stored_events(faulty.inner().as_ref(), &k).await.len(),
        2 * turns,
        "the failed append wrote nothing"
    );
}

#[tokio::test]
async fn a_memory_store_holds_each_turn_before_its_call_returns() {
    acknowledged_turns_are_stored(Arc::new(InMemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_store_holds_each_turn_before_its_call_returns() {
    let (_dir, store) = temp_file_store();
    acknowledged_turns_are_stored(Arc::new(store)).await;
}
