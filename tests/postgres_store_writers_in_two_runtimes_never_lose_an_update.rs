//! Property: two runtimes (two pools, as two processes would have) on one PostgreSQL database
//! never lose each other's updates — a write based on a stale head is a `Conflict`, also when
//! the session was deleted and created again up to the same version in between, and every turn
//! either runtime acknowledged is in the store.
#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;

use turnstile::backend::PostgresOptions;
use turnstile::store::conformance::turn_events;
use turnstile::{EchoAgent, Error, Runtime, SessionKey, Store, StoreError};

use support::harness::stored_events;
use support::postgres::TestDatabase;

fn is_conflict(result: &Result<u64, StoreError>) -> bool {
    matches!(result, Err(StoreError::Conflict { .. }))
}

/// Two stores on one schema, as two processes would open them.
async fn two_stores(database: &TestDatabase) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let options = PostgresOptions::default().with_schema("shared");
    let a = database.store_with(options.clone()).await;
    let b = database.store_with(options).await;
    (Arc::new(a), Arc::new(b))
}

#[tokio::test]
async fn a_write_based_on_a_head_the_other_store_replaced_is_refused() {
    let database = TestDatabase::create().await;
    let (a, b) = two_stores(&database).await;
    let key = SessionKey::new("shared", "s").expect("key");
    let v1 = a
        .append(&key, 0, &turn_events(1, "a1", None))
        .await
        .expect("a appends");
    let v2 = b
        .append(&key, v1, &turn_events(3, "b1", None))
        .await
        .expect("b appends");
    let stale = a.append(&key, v1, &turn_events(3, "a2", None)).await;
    match stale {
        Err(StoreError::Conflict {
            expected, found, ..
        }) => assert_eq!((expected, found), (v1, v2)),
        other => panic!("a stale write must be a Conflict, got {other:?}"),
    }
    let loaded = a.load(&key, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, v2);
    assert_eq!(loaded.events[2].text(), Some("b1"));
}

#[tokio::test]
async fn a_session_deleted_and_recreated_to_the_same_version_is_not_written_over() {
    let database = TestDatabase::create().await;
    let (a, b) = two_stores(&database).await;
    let key = SessionKey::new("shared", "t").expect("key");
    let v1 = a
        .append(&key, 0, &turn_events(1, "old", None))
        .await
        .expect("a appends");
    assert!(b.delete(&key).await.expect("b deletes"));
    let again = b
        .append(&key, 0, &turn_events(1, "new", None))
        .await
        .expect("b recreates");
    assert_eq!(again, v1, "the new incarnation reaches the same version");
    let stale = a.append(&key, v1, &turn_events(3, "lost?", None)).await;
    assert!(is_conflict(&stale), "{stale:?}");
    let events = b.read_events(&key, 1, 10).await.expect("read");
    assert_eq!(events.len(), 2, "only the new incarnation's events");
    assert_eq!(events[0].text(), Some("new"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runtimes_calling_one_session_keep_every_acknowledged_turn() {
    let database = TestDatabase::create().await;
    let (a, b) = two_stores(&database).await;
    let runtime = |store: Arc<dyn Store>| {
        Runtime::builder()
            .agent(EchoAgent)
            .store_arc(store)
            .build()
            .expect("runtime")
    };
    let (ra, rb) = (runtime(a.clone()), runtime(b));
    let key = SessionKey::new("shared", "chat").expect("key");
    let mut acknowledged = Vec::new();
    let mut conflicts = 0;
    // Alternating calls: each runtime's live session is stale after the other's turn.
    for round in 0..6 {
        for (name, rt) in [("a", &ra), ("b", &rb)] {
            let input = format!("{name}{round}");
            match rt.call(&key, input.clone()).await {
                Ok(_) => acknowledged.push(input),
                Err(Error::Store { source, .. })
                    if matches!(*source, StoreError::Conflict { .. }) =>
                {
                    conflicts += 1;
                }
                Err(other) => panic!("a stale runtime must see a Conflict, got {other:?}"),
            }
        }
    }
    assert!(
        conflicts > 0,
        "the runtimes did write over each other's heads"
    );
    assert!(!acknowledged.is_empty());
    let stored: Vec<String> = stored_events(a.as_ref(), &key)
        .await
        .iter()
        .filter_map(|e| match &e.kind {
            turnstile::state::EventKind::UserInput { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        stored, acknowledged,
        "exactly the acknowledged turns, in order"
    );
    ra.shutdown().await;
    rb.shutdown().await;
}
