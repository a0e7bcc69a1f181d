//! Memory benchmarks: searching one user's 100,000 entries (targets: p99 < 10 ms in memory and
//! on disk) and ingesting (target: ≥ 5,000 entries/s), see docs/BENCHMARKS.md, section
//! "Memory".
//!
//! Run: `cargo bench --bench memory -- --warm-up-time 1 --measurement-time 3`
//!
//! Besides criterion's means, it prints each store's search latency percentiles over
//! `SEARCHES` queries, and ingest rates, measured in the same run.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use tokio::runtime::Runtime;
use turnstile::backend::FileMemory;
use turnstile::memory::{InMemory, MemoryEntry, MemoryStore, Speaker};
use turnstile::SessionKey;

/// Entries of the one user searched: the per-user bound.
const ENTRIES: usize = 100_000;
/// Entries per ingest call when filling: one session's worth of turns at a passivation.
const BATCH: usize = 100;
/// Queries timed for the percentiles.
const SEARCHES: usize = 2_000;
/// Distinct words of the synthetic vocabulary.
const VOCABULARY: u64 = 5_000;
/// Entries returned per search: what an auto-recall asks for.
const K: usize = 5;

/// A small deterministic generator (xorshift), so every run searches the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A word, with a Zipf-like skew: low ranks are much more frequent, as in speech.
    fn word(&mut self) -> String {
        let a = self.next() % VOCABULARY + 1;
        let b = self.next() % a + 1;
        format!("w{b}")
    }

    fn text(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.word())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn entries(count: usize, seed: u64) -> Vec<MemoryEntry> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|i| MemoryEntry {
            key: SessionKey::new("bench", format!("s{}", i / BATCH)).expect("key"),
            seq: (i % BATCH) as u64 + 1,
            speaker: if i % 2 == 0 {
                Speaker::User
            } else {
                Speaker::Agent
            },
            text: rng.text(12 + (i % 20)),
            at_ms: i as u64,
        })
        .collect()
}

async fn fill(store: &dyn MemoryStore, all: &[MemoryEntry]) -> Duration {
    let started = Instant::now();
    for batch in all.chunks(BATCH) {
        store.ingest(batch).await.expect("ingest");
    }
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Times `SEARCHES` three-word queries and prints their percentiles.
async fn search_percentiles(label: &str, store: &dyn MemoryStore) {
    let mut rng = Rng(99);
    let mut times = Vec::with_capacity(SEARCHES);
    for _ in 0..SEARCHES {
        let query = rng.text(3);
        let started = Instant::now();
        store.search("bench", &query, K).await.expect("search");
        times.push(started.elapsed());
    }
    times.sort();
    let over = times
        .iter()
        .filter(|t| **t > Duration::from_millis(10))
        .count();
    println!(
        "memory/{label}: search over {ENTRIES} entries, k={K}: p50 {:?} p99 {:?} p99.9 {:?} max {:?}; {over} of {SEARCHES} over 10 ms",
        percentile(&times, 0.50),
        percentile(&times, 0.99),
        percentile(&times, 0.999),
        times[times.len() - 1],
    );
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().expect("tokio");
    let all = entries(ENTRIES, 7);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut stores: Vec<(&str, Arc<dyn MemoryStore>)> = vec![
        ("memory", Arc::new(InMemory::new())),
        (
            "file",
            Arc::new(FileMemory::open(dir.path().join("m")).expect("open")),
        ),
    ];
    for (label, store) in &stores {
        let took = rt.block_on(fill(store.as_ref(), &all));
        println!(
            "memory/{label}: ingested {ENTRIES} entries in batches of {BATCH} in {took:?}: {:.0} entries/s",
            ENTRIES as f64 / took.as_secs_f64()
        );
        rt.block_on(search_percentiles(label, store.as_ref()));
    }
    // A cold file store: the first search reads the user's log and builds the index. The
    // folder opens once the warm store let go of it; the cold one then takes its place.
    stores.retain(|(label, _)| *label != "file");
    let cold = FileMemory::open(dir.path().join("m")).expect("reopen");
    let started = Instant::now();
    rt.block_on(cold.search("bench", "w1 w2", K))
        .expect("search");
    println!(
        "memory/file: first search after opening (reads {ENTRIES} entries): {:?}",
        started.elapsed()
    );
    stores.push(("file", Arc::new(cold)));

    let mut group = c.benchmark_group("memory");
    for (label, store) in &stores {
        let mut rng = Rng(5);
        group.bench_function(format!("search_100k_{label}"), |b| {
            b.to_async(&rt).iter(|| {
                let query = rng.text(3);
                let store = store.clone();
                async move { store.search("bench", &query, K).await.expect("search") }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
