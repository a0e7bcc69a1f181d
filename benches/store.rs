//! Store benchmarks: what one turn's append and one activation's load cost as history grows,
//! and how close each durable store comes to the raw cost of its medium, measured in the same
//! run (see docs/BENCHMARKS.md, section "Stores").
//!
//! Run: `cargo bench --bench store -- --warm-up-time 1 --measurement-time 3`
#![allow(missing_docs)]

#[cfg(feature = "redis")]
#[path = "../tests/support/redis_server.rs"]
#[allow(dead_code)]
mod redis_server;

#[cfg(feature = "postgres")]
#[path = "../tests/support/postgres.rs"]
#[allow(dead_code)]
mod postgres_db;

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;
use tokio::runtime::Runtime;
use turnstile::backend::FileStore;
use turnstile::state::{Event, StateDelta};
use turnstile::store::conformance::turn_events;
use turnstile::{InMemoryStore, SessionKey, Store};

/// History sizes, in events, at which append and load are measured.
const HISTORY: [u64; 3] = [20, 2_000, 20_000];
/// The window loads ask for: the smallest history, so that every size returns as many events
/// and any difference is the cost of the history itself.
const WINDOW: usize = 20;

/// One turn as the runtime writes it: a user input and a reply of chat-like size, with a delta.
fn turn(seq: u64) -> Vec<Event> {
    let delta: StateDelta = [("topic".to_owned(), json!(seq))].into();
    let mut events = turn_events(seq, &"a typical user message ".repeat(4), Some(delta));
    if let turnstile::state::EventKind::AgentOutput { text, .. } = &mut events[1].kind {
        *text = "a typical agent reply of a few sentences. ".repeat(12);
    }
    events
}

/// A session's state as the benchmark tracks it: its version and next sequence number.
struct Cursor {
    key: SessionKey,
    version: u64,
    next_seq: u64,
}

/// `sessions` sessions named after `label` with `history` events each, written in one append
/// per session.
async fn prefill(store: &dyn Store, label: &str, history: u64, sessions: usize) -> Vec<Cursor> {
    let mut cursors = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let key = SessionKey::new("bench", format!("{label}-{history}-{s}")).expect("key");
        let events: Vec<Event> = (0..history / 2).flat_map(|t| turn(1 + 2 * t)).collect();
        let version = store.append(&key, 0, &events).await.expect("prefill");
        cursors.push(Cursor {
            key,
            version,
            next_seq: history + 1,
        });
    }
    cursors
}

/// Flushes dirty pages left by a prefill, so that their writeback does not slow the fsyncs
/// being measured.
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// How many sessions to spread appends over, so that each grows little during a run.
fn sessions_for(history: u64) -> usize {
    match history {
        0..=100 => 256,
        101..=5_000 => 32,
        _ => 8,
    }
}

/// Cursors shared with criterion's closures, which cannot lend out a `&mut`.
type Cursors = Arc<tokio::sync::Mutex<Vec<Cursor>>>;

/// Times `iters` appends spread round-robin over the cursors.
async fn timed_appends(store: &dyn Store, cursors: &Cursors, iters: u64) -> Duration {
    let mut cursors = cursors.lock().await;
    let mut total = Duration::ZERO;
    let count = cursors.len();
    for i in 0..iters {
        let cursor = &mut cursors[i as usize % count];
        let events = turn(cursor.next_seq);
        let started = Instant::now();
        cursor.version = store
            .append(&cursor.key, cursor.version, &events)
            .await
            .expect("append");
        total += started.elapsed();
        cursor.next_seq += 2;
    }
    total
}

/// What must outlive the stores: temporary folders, a Redis server, a PostgreSQL database.
type Guards = Vec<Box<dyn std::any::Any>>;

/// Every store to measure, each new and empty.
fn stores(rt: &Runtime) -> (Vec<Arc<dyn Store>>, Guards) {
    let mut guards: Guards = Vec::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = FileStore::open(dir.path()).expect("open file store");
    guards.push(Box::new(dir));
    let mut out: Vec<Arc<dyn Store>> = vec![Arc::new(InMemoryStore::new()), Arc::new(file)];
    #[cfg(feature = "redis")]
    {
        let server = redis_server::RedisServer::start();
        out.push(Arc::new(rt.block_on(server.store())));
        guards.push(Box::new(server));
    }
    #[cfg(feature = "postgres")]
    {
        let database = rt.block_on(postgres_db::TestDatabase::create());
        out.push(Arc::new(rt.block_on(database.store())));
        guards.push(Box::new(database));
    }
    let _ = rt;
    (out, guards)
}

fn append_and_load_by_history(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let (stores, _guards) = stores(&rt);
    let mut append = c.benchmark_group("append_one_turn");
    for store in &stores {
        for history in HISTORY {
            let cursors = rt.block_on(prefill(
                store.as_ref(),
                "append",
                history,
                sessions_for(history),
            ));
            let cursors: Cursors = Arc::new(tokio::sync::Mutex::new(cursors));
            append.bench_function(BenchmarkId::new(store.name(), history), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (store, cursors) = (store.clone(), cursors.clone());
                    async move { timed_appends(store.as_ref(), &cursors, iters).await }
                })
            });
        }
    }
    append.finish();
    let mut load = c.benchmark_group("load_window_20");
    for store in &stores {
        for history in HISTORY {
            let cursors = rt.block_on(prefill(store.as_ref(), "load", history, 1));
            let key = cursors[0].key.clone();
            load.bench_function(BenchmarkId::new(store.name(), history), |b| {
                b.to_async(&rt).iter(|| async {
                    let loaded = store.load(&key, WINDOW).await.expect("load");
                    assert_eq!(loaded.events.len(), WINDOW.min(history as usize));
                })
            });
        }
    }
    load.finish();
}

/// The file store's append next to the raw cost of its medium: appending the same bytes to a
/// file and fsyncing it.
fn file_against_raw_fsync(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path().join("store")).expect("open");
    let cursors: Cursors = Arc::new(tokio::sync::Mutex::new(
        rt.block_on(prefill(&store, "durable", 20, 64)),
    ));
    let line: Vec<u8> = turn(1)
        .iter()
        .flat_map(|e| {
            let mut line = serde_json::to_vec(e).expect("json");
            line.push(b'\n');
            line
        })
        .collect();
    settle();
    let mut group = c.benchmark_group("durable_append");
    group.bench_function("file_store_append", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (store, cursors) = (&store, cursors.clone());
            async move { timed_appends(store, &cursors, iters).await }
        })
    });
    let raw_path = dir.path().join("raw.jsonl");
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)
        .expect("open raw file");
    group.bench_function("raw_write_and_fsync", |b| {
        b.iter(|| {
            raw.write_all(&line).expect("write");
            raw.sync_data().expect("fsync");
        })
    });
    group.finish();
}

/// The Redis store's append next to a raw SET of the same payload size through the same client
/// library, one caller at a time.
#[cfg(feature = "redis")]
fn redis_against_raw_set(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let server = redis_server::RedisServer::start();
    let store = rt.block_on(server.store());
    let cursors: Cursors = Arc::new(tokio::sync::Mutex::new(
        rt.block_on(prefill(&store, "durable", 20, 64)),
    ));
    let events = turn(21);
    let payload_len = events
        .iter()
        .map(|e| serde_json::to_vec(e).expect("json").len())
        .sum::<usize>()
        + 1_000; // the head travels with the events
    let payload = Arc::new(vec![b'x'; payload_len]);
    let conn = rt.block_on(async {
        let client = redis::Client::open(server.url()).expect("client");
        redis::aio::ConnectionManager::new(client)
            .await
            .expect("connect")
    });
    let mut group = c.benchmark_group("redis_append");
    group.bench_function("redis_store_append", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (store, cursors) = (&store, cursors.clone());
            async move { timed_appends(store, &cursors, iters).await }
        })
    });
    group.bench_function(format!("raw_set_{payload_len}_bytes"), |b| {
        b.to_async(&rt).iter(|| {
            let (mut conn, payload) = (conn.clone(), payload.clone());
            async move {
                let () = redis::cmd("SET")
                    .arg("bench:raw")
                    .arg(payload.as_slice())
                    .query_async(&mut conn)
                    .await
                    .expect("SET");
            }
        })
    });
    group.finish();
}

#[cfg(not(feature = "redis"))]
fn redis_against_raw_set(_: &mut Criterion) {}

criterion_group!(
    benches,
    file_against_raw_fsync,
    redis_against_raw_set,
    append_and_load_by_history
);
criterion_main!(benches);
