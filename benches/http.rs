//! Turns per second through the HTTP gateway next to in-process `Runtime::call`, on the same
//! workload in the same run.
//!
//! ```sh
//! cargo bench --bench http
//! ```
//!
//! Each configuration runs twice on fresh runtimes and stores: once with `CONCURRENCY`
//! closed-loop tasks calling `Runtime::call`, once with as many tasks each holding a keep-alive
//! HTTP/1.1 connection to a `Gateway` served on 127.0.0.1 in this process (the client shares
//! the two cores with the server, as a sidecar or a local load generator would). Sessions are
//! owned by one task each, so turns never wait behind one another. Reports turns/s, latency
//! percentiles and the HTTP/in-process ratio. Figures are in `docs/BENCHMARKS.md`, "HTTP".

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use turnstile::backend::FileStore;
use turnstile::{
    channel::ChannelRouter, channel::MemoryPairingStore, http::Gateway, EchoAgent, InMemoryStore,
    Runtime, SessionKey, Store,
};

/// Distinct sessions; every one gets `turns / SESSIONS` turns.
const SESSIONS: usize = 1_000;
/// Closed-loop callers (and HTTP connections). The design notes advise bounding in-flight
/// requests near workers × 128; 64 and 256 bracket that on 2 cores.
const CONCURRENCY: [usize; 2] = [64, 256];

/// One measured run.
struct Figures {
    turns: u64,
    elapsed: Duration,
    latency_us: Histogram<u64>,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.turns as f64 / self.elapsed.as_secs_f64()
    }

    fn row(&self, what: &str) -> String {
        let q = |p: f64| self.latency_us.value_at_quantile(p) as f64 / 1_000.0;
        format!(
            "| {what} | {:>9.0} | {:>6.2} | {:>6.2} | {:>6.2} |",
            self.rate(),
            q(0.5),
            q(0.99),
            q(0.999)
        )
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// The sessions task `task` of `concurrency` owns.
fn owned(keys: &[SessionKey], task: usize, concurrency: usize) -> Vec<SessionKey> {
    keys.iter()
        .skip(task)
        .step_by(concurrency)
        .cloned()
        .collect()
}

async fn in_process(
    runtime: &Runtime,
    keys: &[SessionKey],
    concurrency: usize,
    turns: usize,
) -> Figures {
    let per_task = turns / concurrency;
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let (runtime, mine) = (runtime.clone(), owned(keys, task, concurrency));
            tokio::spawn(async move {
                let mut latency = histogram();
                for turn in 0..per_task {
                    let key = &mine[turn % mine.len()];
                    let began = Instant::now();
                    runtime.call(key, "hello").await.expect("in-process turn");
                    latency.saturating_record(began.elapsed().as_micros() as u64);
                }
                latency
            })
        })
        .collect();
    collect(tasks, started, per_task * concurrency).await
}

async fn over_http(base: &str, keys: &[SessionKey], concurrency: usize, turns: usize) -> Figures {
    let per_task = turns / concurrency;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .build()
        .expect("an HTTP client");
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let urls: Vec<String> = owned(keys, task, concurrency)
                .iter()
                .map(|k| {
                    format!(
                        "{base}/v1/sessions/{}/{}/turns",
                        k.user_id(),
                        k.session_id()
                    )
                })
                .collect();
            let client = client.clone();
            tokio::spawn(async move {
                let mut latency = histogram();
                for turn in 0..per_task {
                    let began = Instant::now();
                    let response = client
                        .post(&urls[turn % urls.len()])
                        .header("content-type", "application/json")
                        .body(r#"{"input":"hello"}"#)
                        .send()
                        .await
                        .expect("an HTTP answer");
                    assert!(response.status().is_success(), "{}", response.status());
                    response.bytes().await.expect("the body");
                    latency.saturating_record(began.elapsed().as_micros() as u64);
                }
                latency
            })
        })
        .collect();
    collect(tasks, started, per_task * concurrency).await
}

async fn collect(
    tasks: Vec<tokio::task::JoinHandle<Histogram<u64>>>,
    started: Instant,
    turns: usize,
) -> Figures {
    let mut latency_us = histogram();
    for task in tasks {
        latency_us
            .add(task.await.expect("a bench task"))
            .expect("histograms with equal bounds");
    }
    Figures {
        turns: turns as u64,
        elapsed: started.elapsed(),
        latency_us,
    }
}

/// A fresh store of the named kind, and the folder that must outlive it.
fn store(kind: &str) -> (Arc<dyn Store>, Option<tempfile::TempDir>) {
    match kind {
        "file" => {
            let dir = tempfile::tempdir().expect("a temporary folder");
            let store = FileStore::open(dir.path()).expect("a file store");
            (Arc::new(store), Some(dir))
        }
        _ => (Arc::new(InMemoryStore::new()), None),
    }
}

fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .expect("a runtime")
}

async fn compare(kind: &str, turns: usize, concurrency: usize, keys: &[SessionKey]) {
    let (local_store, _local_dir) = store(kind);
    let local = runtime(local_store);
    in_process(&local, keys, concurrency, SESSIONS).await; // warm-up: activates every session
    let inproc = in_process(&local, keys, concurrency, turns).await;
    local.shutdown().await;

    let (served_store, _served_dir) = store(kind);
    let served = runtime(served_store);
    let gateway = Gateway::new(ChannelRouter::new(
        served.clone(),
        MemoryPairingStore::new(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(gateway.serve(listener, async move {
        let _ = stopped.await;
    }));
    over_http(&base, keys, concurrency, SESSIONS).await; // warm-up: connections and sessions
    let http = over_http(&base, keys, concurrency, turns).await;
    let _ = stop.send(());
    let _ = server.await;

    let floor = bare_axum(keys, concurrency, turns).await;

    println!(
        "\n{kind} store, {concurrency} concurrent callers, {turns} turns over {SESSIONS} sessions"
    );
    println!("| path | turns/s | p50 ms | p99 ms | p99.9 ms |");
    println!("|---|---|---|---|---|");
    println!("{}", inproc.row("in-process `Runtime::call`"));
    println!("{}", http.row("HTTP `POST …/turns` (JSON)"));
    println!("{}", floor.row("HTTP floor: bare axum handler, no runtime"));
    println!(
        "HTTP / in-process: {:.2}×; HTTP / floor: {:.2}×",
        http.rate() / inproc.rate(),
        http.rate() / floor.rate()
    );
}

/// The same client against an axum handler that answers a fixed outcome: what the HTTP stack
/// alone (client and server on these two cores) allows.
async fn bare_axum(keys: &[SessionKey], concurrency: usize, turns: usize) -> Figures {
    let app = axum::Router::new().route(
        "/v1/sessions/{user}/{session}/turns",
        axum::routing::post(|| async {
            axum::Json(serde_json::json!({"outcome": "completed", "output": "hello", "seq": 2}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound"));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    over_http(&base, keys, concurrency, SESSIONS).await;
    let figures = over_http(&base, keys, concurrency, turns).await;
    server.abort();
    figures
}

fn main() {
    let workers = 2;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let keys: Vec<SessionKey> = (0..SESSIONS)
        .map(|i| SessionKey::new(format!("user{}", i % 100), format!("s{i}")).expect("a key"))
        .collect();
    println!("turnstile HTTP bench: {workers} tokio workers, EchoAgent (no latency)");
    tokio.block_on(async {
        for concurrency in CONCURRENCY {
            compare("memory", 60_000, concurrency, &keys).await;
        }
        for concurrency in CONCURRENCY {
            compare("file", 6_000, concurrency, &keys).await;
        }
    });
}
