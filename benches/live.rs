//! The live-sessions endpoint over 100,000 live sessions: how long a page of 100 takes through
//! the router, and the latency of concurrent turns with no client, a client reading a page a
//! second (as `/console` does) and one reading pages back to back (rounds alternate, so that
//! all see the same machine).
//!
//! `cargo bench --bench live` (release; prints a table for `docs/BENCHMARKS.md`)

#![allow(missing_docs)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use hdrhistogram::Histogram;
use tower::ServiceExt;
use turnstile::channel::ChannelRouter;
use turnstile::http::Gateway;
use turnstile::{EchoAgent, InMemoryStore, LiveQuery, Runtime, SessionKey};

const SESSIONS: usize = 100_000;
const CALLERS: usize = 256;
const ROUND: Duration = Duration::from_secs(5);
const ROUNDS: usize = 2;

fn key(i: usize) -> SessionKey {
    SessionKey::new(format!("u{:03}", i % 1000), format!("s{i:06}")).expect("a valid key")
}

async fn activate(runtime: &Runtime) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CALLERS {
        let runtime = runtime.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..SESSIONS).step_by(CALLERS) {
                runtime.call(&key(i), "hello").await.expect("a turn");
            }
        }));
    }
    for task in tasks {
        task.await.expect("activation task");
    }
    println!(
        "activated {} sessions in {:.1} s",
        runtime.live_sessions(),
        started.elapsed().as_secs_f64()
    );
}

/// Times `n` reads of a page of 100 through the router, from cursors spread over the keys.
async fn page_times(gateway: &Gateway, n: usize) -> Histogram<u64> {
    let mut times = Histogram::<u64>::new(3).expect("histogram");
    let router = gateway.router();
    for i in 0..n {
        let after = key((i * 7_919) % SESSIONS);
        let cursor = format!("{}.{}", hex(after.user_id()), hex(after.session_id()));
        let uri = format!("/v1/admin/live?limit=100&cursor={cursor}");
        let started = Instant::now();
        let response = router
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("answer");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        times
            .record(started.elapsed().as_micros() as u64)
            .expect("record");
        assert!(body.len() > 1_000, "a page of sessions");
    }
    times
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Turns from `CALLERS` closed-loop callers for `ROUND`; with `poll`, a client reads a page of
/// the live list every `poll` meanwhile (`ZERO`: back to back).
async fn turns(
    runtime: &Runtime,
    gateway: &Gateway,
    poll: Option<Duration>,
) -> (Histogram<u64>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll.map(|every| {
        let (gateway, stop) = (gateway.clone(), stop.clone());
        tokio::spawn(async move {
            let mut pages = 0u64;
            while !stop.load(Ordering::Relaxed) {
                page_times(&gateway, 1).await;
                pages += 1;
                if !every.is_zero() {
                    tokio::time::sleep(every).await;
                }
            }
            pages
        })
    });
    let mut tasks = Vec::new();
    for c in 0..CALLERS {
        let (runtime, stop) = (runtime.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Histogram::<u64>::new(3).expect("histogram");
            let mut i = c;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                runtime.call(&key(i), "again").await.expect("a turn");
                times
                    .record(started.elapsed().as_micros() as u64)
                    .expect("record");
                i = (i + CALLERS) % SESSIONS;
            }
            times
        }));
    }
    tokio::time::sleep(ROUND).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    for task in tasks {
        all.add(task.await.expect("caller")).expect("merge");
    }
    let pages = match poller {
        Some(p) => p.await.expect("poller"),
        None => 0,
    };
    (all, pages)
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let runtime = Runtime::builder()
            .agent(EchoAgent)
            .store(InMemoryStore::new())
            .with_capacity(SESSIONS)
            .build()
            .expect("runtime");
        let gateway = Gateway::new(ChannelRouter::new(
            runtime.clone(),
            turnstile::channel::MemoryPairingStore::new(),
        ));
        activate(&runtime).await;

        let direct = Instant::now();
        for i in 0..1_000 {
            let page = runtime.live_page(&LiveQuery {
                user: None,
                after: Some(key((i * 7_919) % SESSIONS)),
                limit: 100,
            });
            assert!(!page.sessions.is_empty());
        }
        println!(
            "Runtime::live_page, 100 of {SESSIONS}: {:.1} µs per page (mean of 1,000)",
            direct.elapsed().as_secs_f64() * 1e6 / 1_000.0
        );
        let pages = page_times(&gateway, 1_000).await;
        println!(
            "GET /v1/admin/live?limit=100 (router, JSON included): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms(&pages, 0.5),
            ms(&pages, 0.99),
            pages.max() as f64 / 1e3
        );

        println!("| round | poller | turns/s | p50 ms | p99 ms | p99.9 ms | pages read |");
        println!("|---|---|---|---|---|---|---|");
        for round in 0..ROUNDS {
            for (poll, name) in [
                (None, "none"),
                (Some(Duration::from_secs(1)), "once a second"),
                (Some(Duration::ZERO), "back to back"),
            ] {
                let (times, read) = turns(&runtime, &gateway, poll).await;
                println!(
                    "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
                    round + 1,
                    name,
                    times.len() as f64 / ROUND.as_secs_f64(),
                    ms(&times, 0.5),
                    ms(&times, 0.99),
                    ms(&times, 0.999),
                    read
                );
            }
        }
    });
}
