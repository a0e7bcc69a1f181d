//! Turn round trip on the memory store with `EchoAgent`, next to a bare ractor `call` round trip
//! measured in the same run: the floor any ractor-based runtime pays.
//!
//! `cargo bench --bench turn`

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use turnstile::{EchoAgent, InMemoryStore, Runtime, SessionKey};

/// The simplest actor that answers a call: the baseline.
struct Bare;

impl Actor for Bare {
    type Msg = RpcReplyPort<u64>;
    type State = u64;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        reply: Self::Msg,
        n: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        *n += 1;
        let _ = reply.send(*n);
        Ok(())
    }
}

fn round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut group = c.benchmark_group("round_trip");
    group.measurement_time(Duration::from_secs(5));

    let (bare, _join) = rt
        .block_on(Actor::spawn(None, Bare, ()))
        .expect("spawn bare actor");
    group.bench_function("bare_ractor_call", |b| {
        b.to_async(&rt)
            .iter(|| async { ractor::call!(bare, |reply| reply).expect("bare call") })
    });

    let runtime = rt.block_on(async {
        Runtime::builder()
            .agent(EchoAgent)
            .store(InMemoryStore::new())
            .build()
            .expect("runtime")
    });
    let mut batch = 0u64;
    group.bench_function("turnstile_call_memory_echo", |b| {
        b.iter_custom(|iters| {
            // A fresh session per batch keeps the memory store's size bounded by one batch.
            batch += 1;
            let key = SessionKey::new("bench", format!("s{batch}")).expect("key");
            rt.block_on(async {
                runtime.call(&key, "warm").await.expect("call");
                let start = Instant::now();
                for _ in 0..iters {
                    runtime.call(&key, "ping").await.expect("call");
                }
                let elapsed = start.elapsed();
                runtime.delete(&key).await.expect("delete");
                elapsed
            })
        })
    });
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
