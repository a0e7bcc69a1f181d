//! Runtime figures that criterion's mean-time model does not fit: interrupt latency percentiles
//! under load, activation + passivation churn, and memory per idle session next to a bare ractor
//! actor. Each figure is printed with its baseline from the same run.
//!
//! `cargo bench --bench figures` (or `-- interrupt|churn|footprint` for one of them)

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use async_trait::async_trait;
use hdrhistogram::Histogram;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use turnstile::state::{Event, Seq};
use turnstile::store::{GcPolicy, GcReport, LoadedSession, Page, PageRequest};
use turnstile::{EchoAgent, MockLlmAgent, OutcomeKind, Runtime, SessionKey, Store, StoreError};

/// A store that keeps nothing, so that figures measure the runtime alone.
struct NullStore;

#[async_trait]
impl Store for NullStore {
    fn name(&self) -> &'static str {
        "null"
    }
    async fn load(&self, _: &SessionKey, _: usize) -> Result<LoadedSession, StoreError> {
        Ok(LoadedSession::default())
    }
    async fn append(&self, _: &SessionKey, base: u64, _: &[Event]) -> Result<u64, StoreError> {
        Ok(base + 1)
    }
    async fn read_events(
        &self,
        _: &SessionKey,
        _: Seq,
        _: usize,
    ) -> Result<Vec<Event>, StoreError> {
        Ok(Vec::new())
    }
    async fn delete(&self, _: &SessionKey) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn list(&self, _: &str, _: &PageRequest) -> Result<Page, StoreError> {
        Ok(Page::default())
    }
    async fn delete_user(&self, _: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
    async fn gc(&self, _: &GcPolicy, _: u64) -> Result<GcReport, StoreError> {
        Ok(GcReport::default())
    }
}

struct Bare;

impl Actor for Bare {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

fn key(i: usize) -> SessionKey {
    SessionKey::new(format!("u{}", i % 1000), format!("s{i}")).expect("key")
}

fn percentile_line(name: &str, h: &Histogram<u64>) {
    println!(
        "{name}: n={} p50={}µs p99={}µs p99.9={}µs max={}µs",
        h.len(),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max()
    );
}

/// 1,000 sessions each in a long mock-LLM turn; each is interrupted in turn, and the time from
/// `interrupt` to its caller holding the `Interrupted` outcome is recorded.
async fn interrupt_latency() {
    const BUSY: usize = 1_000;
    let rt = Runtime::builder()
        .agent(MockLlmAgent::new().with_latency(Duration::from_secs(3600)))
        .store(NullStore)
        .build()
        .expect("runtime");
    let mut calls = Vec::with_capacity(BUSY);
    for i in 0..BUSY {
        let (rt, k) = (rt.clone(), key(i));
        calls.push(tokio::spawn(async move { rt.call(&k, "think hard").await }));
    }
    while rt.stats().activations < BUSY as u64 || (0..BUSY).any(|i| rt.pending(&key(i)) == 0) {
        tokio::task::yield_now().await;
    }
    // Give every turn time to reach its first await inside the agent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    for (i, call) in calls.into_iter().enumerate() {
        let start = Instant::now();
        assert!(rt.interrupt(&key(i)), "session {i} was busy");
        let outcome = call.await.expect("task").expect("outcome");
        h.record(start.elapsed().as_micros() as u64)
            .expect("record");
        assert!(matches!(outcome.kind, OutcomeKind::Interrupted(_)));
    }
    percentile_line("interrupt_to_outcome (1,000 busy sessions)", &h);
    rt.shutdown().await;
}

/// 100,000 distinct keys through a capacity of 1,000: activations + passivations per second.
async fn churn() {
    const KEYS: usize = 100_000;
    const CALLERS: usize = 256;
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(NullStore)
        .with_capacity(1_000)
        .with_capacity_wait(Duration::from_secs(60))
        .build()
        .expect("runtime");
    let start = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|w| {
            let rt = rt.clone();
            tokio::spawn(async move {
                for i in (w..KEYS).step_by(CALLERS) {
                    rt.call(&key(i), "hi").await.expect("call");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let s = rt.stats();
    let cycles = s.activations + s.evictions_lru + s.evictions_idle;
    println!(
        "churn: {} activations + {} passivations in {elapsed:.2}s = {:.0} per second (peak live {})",
        s.activations,
        s.evictions_lru + s.evictions_idle,
        cycles as f64 / elapsed,
        s.peak_live_sessions
    );
    // Baseline in the same run: spawn and stop as many bare ractor actors, 256 at a time.
    let start = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|w| {
            tokio::spawn(async move {
                for _ in (w..KEYS).step_by(CALLERS) {
                    let (actor, join) = Actor::spawn(None, Bare, ()).await.expect("spawn");
                    actor.stop(None);
                    join.await.expect("join");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "churn baseline: bare ractor spawn + stop, {} in {elapsed:.2}s = {:.0} per second (counting spawn and stop as two)",
        KEYS,
        2.0 * KEYS as f64 / elapsed
    );
    rt.shutdown().await;
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Runs in a child process: RSS growth per idle session or per bare actor.
async fn footprint_child(kind: &str) {
    const N: usize = 100_000;
    let before = rss_bytes();
    let mut keep = Vec::new();
    let rt = if kind == "turnstile" {
        let rt = Runtime::builder()
            .agent(EchoAgent)
            .store(NullStore)
            .with_capacity(N)
            .build()
            .expect("runtime");
        for i in 0..N {
            rt.call(&key(i), "x").await.expect("call");
        }
        Some(rt)
    } else {
        for _ in 0..N {
            keep.push(Actor::spawn(None, Bare, ()).await.expect("spawn"));
        }
        None
    };
    let after = rss_bytes();
    println!("{}", (after - before) as f64 / N as f64);
    if let Some(rt) = rt {
        assert_eq!(rt.live_sessions(), N);
    }
}

fn footprint() {
    let exe = std::env::current_exe().expect("own path");
    let measure = |kind: &str| -> f64 {
        let out = std::process::Command::new(&exe)
            .args(["footprint-child", kind])
            .output()
            .expect("run child");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("child prints bytes per item")
    };
    let bare = measure("bare");
    let session = measure("turnstile");
    println!(
        "footprint: idle session {session:.0} B (one turn in its window) vs bare ractor actor {bare:.0} B = {:.2}x",
        session / bare
    );
}

/// Turn latency in a 10,000-turn session with compaction on, next to a 20-turn session, same run.
async fn long_session() {
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(turnstile::InMemoryStore::new())
        .with_window(20)
        .with_summarizer(turnstile::context::ExtractiveSummarizer::default(), 20)
        .build()
        .expect("runtime");
    let long = key(1);
    for i in 0..10_000 {
        rt.call(&long, format!("message {i}")).await.expect("call");
    }
    let measure = |k: SessionKey, rt: Runtime| async move {
        let mut h = Histogram::<u64>::new(3).expect("histogram");
        for i in 0..2_000 {
            let start = Instant::now();
            rt.call(&k, format!("probe {i}")).await.expect("call");
            h.record(start.elapsed().as_nanos() as u64).expect("record");
        }
        h
    };
    let mut short_sum = 0.0;
    let mut long_sum = 0.0;
    // Alternate short and long samples so that drift on a shared machine hits both alike.
    for round in 0..5 {
        let short_key = key(100 + round);
        for i in 0..20 {
            rt.call(&short_key, format!("warm {i}"))
                .await
                .expect("call");
        }
        let s = measure(short_key, rt.clone()).await;
        let l = measure(long.clone(), rt.clone()).await;
        short_sum += s.mean();
        long_sum += l.mean();
        if round == 4 {
            println!(
                "turn latency, 20-turn session: p50={}ns p99={}ns; 10,000-turn session with compaction: p50={}ns p99={}ns",
                s.value_at_quantile(0.5),
                s.value_at_quantile(0.99),
                l.value_at_quantile(0.5),
                l.value_at_quantile(0.99)
            );
        }
    }
    println!(
        "long session: mean turn {:.1}µs vs short {:.1}µs = {:.2}x",
        long_sum / 5_000.0,
        short_sum / 5_000.0,
        long_sum / short_sum
    );
    rt.shutdown().await;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    if args.first().map(String::as_str) == Some("footprint-child") {
        rt.block_on(footprint_child(args.get(1).map_or("bare", String::as_str)));
        return;
    }
    let only = args.iter().find(|a| !a.starts_with('-')).cloned();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("interrupt") {
        rt.block_on(interrupt_latency());
    }
    if run("churn") {
        rt.block_on(churn());
    }
    if run("context") {
        rt.block_on(long_session());
    }
    if run("footprint") {
        footprint();
    }
}
