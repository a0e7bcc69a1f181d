//! The OpenAI-compatible agent's own cost: turns per second through `OpenAiAgent` against a model
//! server that answers at once, next to `MockLlmAgent` on the same runtime settings in the same
//! run, and the memory per live session with each.
//!
//! ```sh
//! cargo bench --bench openai              # both figures
//! cargo bench --bench openai -- turns     # one of them: turns | footprint
//! ```
//!
//! The model server is a minimal chat-completions endpoint served in this process on 127.0.0.1:
//! every request gets the same four-delta reply with usage, with no delay, so what is measured is
//! the request's serialisation, the HTTP round trip over loopback, SSE parsing and the chunks'
//! way to the caller. A third agent does only the HTTP round trip (same server, no parsing), so
//! that the adapter's own work shows apart from HTTP. The client, the server and the runtime
//! share the two cores. Figures are in
//! `docs/BENCHMARKS.md`, "OpenAI-compatible agent".

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use hdrhistogram::Histogram;
use turnstile::{
    Agent, AgentError, InMemoryStore, MockLlmAgent, OpenAiAgent, Runtime, SessionKey, TurnContext,
};

/// Distinct sessions; each gets `TURNS / SESSIONS` turns.
const SESSIONS: usize = 1_000;
/// Turns per measured run.
const TURNS: usize = 20_000;
/// Closed-loop callers, each owning `SESSIONS / CONCURRENCY` sessions.
const CONCURRENCY: usize = 64;
/// Live sessions held for the footprint figure.
const FOOTPRINT_SESSIONS: usize = 20_000;
/// Sessions that warm up the client, the server and the allocator before the baseline is read.
const WARM_UP: usize = 64;

/// The fixed streamed reply: four deltas, a finish reason, usage, `[DONE]`.
fn reply_body() -> String {
    let mut body = String::new();
    for delta in ["mock reply ", "#0 to: ", "hello ", "there"] {
        let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": delta}}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.push_str(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":6}}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body
}

/// Serves the instant model on a free loopback port; returns its base URL.
async fn instant_model() -> String {
    let body: Arc<str> = reply_body().into();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let body = body.clone();
            async move {
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(body.to_string()))
                    .expect("a valid response")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("bound address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v1")
}

fn key(i: usize) -> SessionKey {
    SessionKey::new(format!("u{}", i % 97), format!("s{i}")).expect("valid key")
}

fn openai(base_url: &str) -> OpenAiAgent {
    OpenAiAgent::builder(base_url, "bench")
        .without_api_key()
        .build()
        .expect("agent")
}

/// The HTTP round trip alone: posts a request of the same shape to the same server and reads
/// the body whole, without parsing it or streaming chunks. What `OpenAiAgent` costs beyond it is
/// its own work (building the conversation, SSE and JSON parsing, emitting chunks, usage).
struct RawHttp {
    client: reqwest::Client,
    url: String,
}

#[async_trait::async_trait]
impl Agent for RawHttp {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let body = serde_json::json!({"model": "bench", "stream": true,
            "messages": [{"role": "user", "content": turn.input()}]});
        let response = self.client.post(&self.url).json(&body).send().await?;
        let bytes = response.bytes().await?;
        Ok(format!("{} bytes", bytes.len()))
    }
}

fn runtime(agent: impl Agent, capacity: usize) -> Runtime {
    Runtime::builder()
        .agent(agent)
        .store(InMemoryStore::new())
        .with_capacity(capacity)
        .build()
        .expect("runtime")
}

/// Runs `TURNS` turns from `CONCURRENCY` callers; returns turns/s and latency percentiles (ms).
async fn turns(rt: &Runtime) -> (f64, f64, f64, f64) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|task| {
            let rt = rt.clone();
            tokio::spawn(async move {
                let mut latency =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
                let owned: Vec<SessionKey> =
                    (task..SESSIONS).step_by(CONCURRENCY).map(key).collect();
                for turn in 0..TURNS / CONCURRENCY {
                    let k = &owned[turn % owned.len()];
                    let sent = Instant::now();
                    rt.call(k, "hello there").await.expect("turn");
                    latency.saturating_record(sent.elapsed().as_micros() as u64);
                }
                latency
            })
        })
        .collect();
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    for task in tasks {
        all.add(task.await.expect("caller")).expect("same bounds");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let q = |p: f64| all.value_at_quantile(p) as f64 / 1_000.0;
    (all.len() as f64 / elapsed, q(0.5), q(0.99), q(0.999))
}

async fn compare_turns() {
    let base_url = instant_model().await;
    println!("| agent | turns/s | p50 ms | p99 ms | p99.9 ms |");
    println!("|---|---:|---:|---:|---:|");
    let mut rates = Vec::new();
    // Twice each, alternating, so that a drift in the machine's load shows as a spread.
    for round in 0..2 {
        for name in ["mock", "raw-http", "openai"] {
            let rt = match name {
                "mock" => runtime(MockLlmAgent::new(), SESSIONS),
                "raw-http" => runtime(
                    RawHttp {
                        client: reqwest::Client::new(),
                        url: format!("{base_url}/chat/completions"),
                    },
                    SESSIONS,
                ),
                _ => runtime(openai(&base_url), SESSIONS),
            };
            let (rate, p50, p99, p999) = turns(&rt).await;
            println!(
                "| {name} (run {}) | {rate:.0} | {p50:.2} | {p99:.2} | {p999:.2} |",
                round + 1
            );
            rates.push((name, rate));
            rt.shutdown().await;
        }
    }
    let mean = |which: &str| {
        let picked: Vec<f64> = rates.iter().filter(|r| r.0 == which).map(|r| r.1).collect();
        picked.iter().sum::<f64>() / picked.len() as f64
    };
    let (mock, raw, model) = (mean("mock"), mean("raw-http"), mean("openai"));
    let cost = |slow: f64, fast: f64| (1e6 / slow - 1e6 / fast).max(0.0);
    println!(
        "openai/mock throughput: {:.2}x ({:.0} µs more per turn); openai/raw-http: {:.2}x (the \
         adapter's own work beyond the HTTP round trip: {:.0} µs per turn), at {CONCURRENCY} callers",
        model / mock,
        cost(model, mock),
        model / raw,
        cost(model, raw)
    );
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

/// Runs in a child process: RSS growth per live session after one turn each.
async fn footprint_child(kind: &str) {
    let base_url = instant_model().await;
    let capacity = FOOTPRINT_SESSIONS + WARM_UP;
    let rt = match kind {
        "openai" => runtime(openai(&base_url), capacity),
        _ => runtime(MockLlmAgent::new(), capacity),
    };
    for i in 0..WARM_UP {
        rt.call(&key(FOOTPRINT_SESSIONS + i), "hello there")
            .await
            .expect("turn");
    }
    let before = rss_bytes();
    let callers: Vec<_> = (0..CONCURRENCY)
        .map(|task| {
            let rt = rt.clone();
            tokio::spawn(async move {
                for i in (task..FOOTPRINT_SESSIONS).step_by(CONCURRENCY) {
                    rt.call(&key(i), "hello there").await.expect("turn");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("caller");
    }
    let after = rss_bytes();
    assert_eq!(rt.live_sessions(), capacity);
    println!(
        "{}",
        after.saturating_sub(before) as f64 / FOOTPRINT_SESSIONS as f64
    );
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
            .expect("child prints bytes per session")
    };
    let mock = measure("mock");
    let model = measure("openai");
    println!(
        "footprint: live session after one turn, {FOOTPRINT_SESSIONS} sessions: mock {mock:.0} B, openai {model:.0} B"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    if args.first().map(String::as_str) == Some("footprint-child") {
        rt.block_on(footprint_child(args.get(1).map_or("mock", String::as_str)));
        return;
    }
    let only = args.iter().find(|a| !a.starts_with('-')).cloned();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("turns") {
        rt.block_on(compare_turns());
    }
    if run("footprint") {
        footprint();
    }
}
