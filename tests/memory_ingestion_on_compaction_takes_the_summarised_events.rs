//! With `Ingest::OnCompaction`, the events a compaction summarises are ingested into memory —
//! and only those: the newest events, still in the window, are not.

mod support;

use std::sync::Arc;

use support::harness::*;
use support::memory::{CountingMemory, MemoryAgent};
use turnstile::context::ExtractiveSummarizer;
use turnstile::memory::InMemory;
use turnstile::{Ingest, MemoryOptions, Runtime};

#[tokio::test]
async fn compaction_ingests_what_it_summarised() {
    let memory = Arc::new(CountingMemory::new(Arc::new(InMemory::new())));
    let rt = Runtime::builder()
        .agent(MemoryAgent::default())
        .store(turnstile::InMemoryStore::new())
        .with_window(2)
        .with_summarizer(ExtractiveSummarizer::default(), 2)
        .with_memory_arc(
            memory.clone(),
            MemoryOptions {
                ingest: Ingest::OnCompaction,
                auto_recall: None,
            },
        )
        .build()
        .unwrap();
    let k = key("quin", "long");
    for i in 0..3 {
        within(rt.call(&k, format!("fact number {i}")))
            .await
            .unwrap();
    }
    eventually("a compaction to ingest", || memory.added() > 0).await;
    assert!(rt.shutdown().await.clean);
    let handed: Vec<_> = memory.calls.lock().iter().flatten().cloned().collect();
    // Six events: the window keeps the newest two, so only seqs 1..=4 may be summarised, and
    // stopping ingests nothing with OnCompaction (seqs 5 and 6 are never handed over).
    assert!(!handed.is_empty());
    assert!(
        handed.iter().all(|(key, seq)| key == &k && *seq <= 4),
        "{handed:?}"
    );
}
