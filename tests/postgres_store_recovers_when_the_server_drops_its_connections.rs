//! Property: when every connection to the database is dropped while writers are busy (as a
//! server restart does; simulated with `pg_terminate_backend`, which leaves the server up for
//! other tests), calls fail with a clear `Unavailable` naming PostgreSQL, the pool replaces its
//! connections by itself, every writer goes on without a new store, and every append that was
//! acknowledged is in the store.
#![cfg(feature = "postgres")]

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

use support::harness::{eventually, within};
use support::postgres::TestDatabase;

const WRITERS: usize = 8;
/// Acknowledged appends each writer makes after the connections were dropped.
const AFTER: usize = 5;

/// Appends turns to its own session until told to stop; returns the texts acknowledged and the
/// errors seen. After an error it reloads, since an append cut off may or may not have landed.
async fn writer(
    store: Arc<dyn Store>,
    id: usize,
    dropped: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    after: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> (Vec<String>, Vec<String>) {
    let key = SessionKey::new("restart", format!("w{id}")).expect("key");
    let (mut version, mut next_seq) = (0, 1);
    let (mut texts, mut errors) = (Vec::new(), Vec::new());
    let mut mine_after = 0;
    while !stop.load(Ordering::SeqCst) {
        let text = format!("w{id}-{next_seq}");
        let was_dropped = dropped.load(Ordering::SeqCst);
        match store
            .append(&key, version, &turn_events(next_seq, &text, None))
            .await
        {
            Ok(v) => {
                (version, next_seq) = (v, next_seq + 2);
                texts.push(text);
                acked.fetch_add(1, Ordering::SeqCst);
                if was_dropped {
                    mine_after += 1;
                    if mine_after == AFTER {
                        after.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            Err(e @ StoreError::Unavailable { .. }) => {
                errors.push(e.to_string());
                // Learn what landed; the reload may itself meet a dropped connection.
                if let Ok(loaded) = store.load(&key, 1).await {
                    if let Some(head) = loaded.record {
                        if head.next_seq > next_seq {
                            texts.push(text);
                        }
                        (version, next_seq) = (head.version, head.next_seq);
                    }
                }
            }
            Err(other) => panic!("writer {id}: expected success or Unavailable, got {other:?}"),
        }
    }
    (texts, errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_give_clear_errors_and_the_pool_recovers() {
    let database = TestDatabase::create().await;
    let store: Arc<dyn Store> = Arc::new(database.store().await);
    let (dropped, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (acked, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let writers: Vec<_> = (0..WRITERS)
        .map(|id| {
            tokio::spawn(writer(
                store.clone(),
                id,
                dropped.clone(),
                acked.clone(),
                after.clone(),
                stop.clone(),
            ))
        })
        .collect();
    eventually("every writer is under way", || {
        acked.load(Ordering::SeqCst) >= WRITERS * 3
    })
    .await;
    let admin = database.admin().await;
    dropped.store(true, Ordering::SeqCst);
    let terminated = database.terminate_connections(&admin).await;
    assert!(terminated > 0, "the store's connections were dropped");
    eventually("every writer succeeds again on the same store", || {
        after.load(Ordering::SeqCst) == WRITERS
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for (id, writer) in writers.into_iter().enumerate() {
        let (texts, errors) = within(writer).await.expect("writer task");
        for error in &errors {
            assert!(
                error.starts_with("postgres store is unavailable: "),
                "a clear error: {error}"
            );
        }
        let key = SessionKey::new("restart", format!("w{id}")).expect("key");
        let stored: Vec<String> = store
            .read_events(&key, 1, usize::MAX)
            .await
            .expect("read")
            .iter()
            .filter(|e| e.seq % 2 == 1)
            .filter_map(|e| e.text().map(str::to_owned))
            .collect();
        assert_eq!(
            stored, texts,
            "writer {id}: every acknowledged append, nothing else"
        );
    }
}
