//! With `Ingest::OnPassivation`, a session is ingested when it stops, from where its last
//! ingestion ended: passivated, re-activated and passivated again, it adds each entry once and
//! hands no entry to the memory store twice.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use support::memory::{CountingMemory, MemoryAgent};
use turnstile::memory::{InMemory, MemoryStore as _};
use turnstile::{Ingest, MemoryOptions, Runtime};

#[tokio::test]
async fn passivating_twice_ingests_each_entry_once() {
    let memory = Arc::new(CountingMemory::new(Arc::new(InMemory::new())));
    let rt = Runtime::builder()
        .agent(MemoryAgent::default())
        .store(turnstile::InMemoryStore::new())
        // One live session: activating another passivates the first.
        .with_capacity(1)
        .with_capacity_wait(Duration::from_secs(5))
        .with_memory_arc(
            memory.clone(),
            MemoryOptions {
                ingest: Ingest::OnPassivation,
                auto_recall: None,
            },
        )
        .build()
        .unwrap();
    let (a, b) = (key("ivy", "a"), key("ivy", "b"));
    within(rt.call(&a, "the garage code is 5512"))
        .await
        .unwrap();
    assert_eq!(
        memory.added(),
        0,
        "nothing is ingested while the session is live"
    );
    within(rt.call(&b, "hello")).await.unwrap();
    eventually("a's first passivation to be ingested", || {
        memory.added() == 2
    })
    .await;

    // Re-activated (a passivates b, then b passivates a again).
    within(rt.call(&a, "the gate code is 7781")).await.unwrap();
    within(rt.call(&b, "hello again")).await.unwrap();
    eventually("a's second passivation to be ingested", || {
        memory.added() == 6
    })
    .await;
    let handed: Vec<_> = memory.calls.lock().iter().flatten().cloned().collect();
    let mut unique = handed.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        handed.len(),
        unique.len(),
        "an entry was handed over twice: {handed:?}"
    );

    let hits = memory.search("ivy", "code", 10).await.unwrap();
    let of_a = hits.iter().filter(|h| h.entry.key == a).count();
    assert_eq!(
        of_a, 4,
        "two inputs and two replies of a, once each: {hits:?}"
    );
    // b is live: its turns are not in memory until it stops.
    within(rt.shutdown()).await;
    assert_eq!(
        memory.added(),
        8,
        "b is ingested when the runtime shuts down"
    );
}
