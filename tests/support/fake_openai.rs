//! A fake OpenAI-compatible chat-completions server on 127.0.0.1, scripted per request: it
//! streams deltas with delays, asks for tool calls, reports usage, refuses with a status (and
//! `Retry-After`), sends a malformed chunk, fails mid-stream, or stalls — and misbehaves on
//! command: raw events of the test's choosing (a huge tool-call index, an error object echoing
//! the key), a body of any text with any status, a stream without end, no headers at all. It
//! records every request and tells when each response body ended and whether it was sent
//! whole, so that a test sees the client close a connection.

#![cfg(feature = "openai")]
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// The API key the fake server accepts when it checks keys.
pub const GOOD_KEY: &str = "sk-test-good-key-0123456789";

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Streams `deltas` as content, `delay` before each, then usage (if given) and `[DONE]`.
    Text {
        deltas: Vec<String>,
        delay: Duration,
        usage: Option<(u64, u64)>,
    },
    /// Asks for these tool calls `(id, name, arguments)`, each split over two chunks.
    ToolCalls(Vec<(String, String, String)>),
    /// Refuses with `status`, an OpenAI-style error body, and `Retry-After` in seconds if given.
    Status {
        status: u16,
        retry_after: Option<u64>,
        message: String,
    },
    /// Streams `deltas`, then an in-stream error object (as servers do when a limit strikes
    /// mid-answer), then ends.
    TextThenError { deltas: Vec<String>, code: u16 },
    /// Streams one good delta, then a chunk that is not JSON.
    Malformed,
    /// Streams `deltas`, then keeps the connection open sending only keep-alive comments.
    Stall { deltas: Vec<String> },
    /// Sends these pieces of body as they are (each `data: …\n\n` or anything else), then
    /// ends.
    Raw(Vec<String>),
    /// Refuses with `status`, `Retry-After` in seconds if given, and `body` as it is.
    RawStatus {
        status: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Streams content deltas of `delta` without end, as fast as the client reads.
    Endless { delta: String },
    /// Never sends the response headers.
    NoHeaders,
}

/// `data: {json}\n\n`, one server-sent event.
pub fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// One content delta as a server-sent event.
pub fn content(text: &str) -> String {
    chunk(json!({"content": text}), None)
}

impl Reply {
    /// A reply streamed at once in these pieces, with usage.
    pub fn text(deltas: &[&str]) -> Self {
        Reply::Text {
            deltas: deltas.iter().map(|d| (*d).to_owned()).collect(),
            delay: Duration::ZERO,
            usage: Some((10, deltas.len() as u64)),
        }
    }
}

/// When a response body ended.
#[derive(Debug, Clone, Copy)]
pub struct BodyEnd {
    /// Which request (0-based).
    pub request: usize,
    /// Whether every byte was produced; false when the client went away first.
    pub finished: bool,
    pub at: Instant,
}

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    /// Answer when the script is empty.
    fallback: Reply,
    requests: Mutex<Vec<(HeaderMap, Value)>>,
    /// The client address of each request: the same one means the same connection.
    peers: Mutex<Vec<SocketAddr>>,
    /// Require `Bearer GOOD_KEY`.
    check_key: bool,
    ends: mpsc::UnboundedSender<BodyEnd>,
}

/// A running fake server; it stops when dropped.
pub struct FakeOpenAi {
    /// `http://127.0.0.1:PORT/v1`, the base URL to give the agent.
    pub base_url: String,
    shared: Arc<Shared>,
    ends: tokio::sync::Mutex<mpsc::UnboundedReceiver<BodyEnd>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// A server that answers `script` in order, then `Reply::text(&["ok"])`.
    pub async fn start(script: Vec<Reply>) -> Self {
        Self::start_with(script, false).await
    }

    /// Like [`FakeOpenAi::start`]; with `check_key`, a request without `GOOD_KEY` gets a 401
    /// whose message echoes the key it was given (as real servers partly do).
    pub async fn start_with(script: Vec<Reply>, check_key: bool) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            fallback: Reply::text(&["ok"]),
            requests: Mutex::new(Vec::new()),
            peers: Mutex::new(Vec::new()),
            check_key,
            ends: tx,
        });
        // Requests carry whole histories, a reply cut at its bound (megabytes) among them.
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("bound address");
        let task = tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            shared,
            ends: tokio::sync::Mutex::new(rx),
            task,
        }
    }

    /// The bodies of the requests received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .iter()
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// The client address of each request so far, in order.
    pub fn peers(&self) -> Vec<SocketAddr> {
        self.shared.peers.lock().clone()
    }

    /// The headers of the requests received so far, in order.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.shared
            .requests
            .lock()
            .iter()
            .map(|(headers, _)| headers.clone())
            .collect()
    }

    /// The next response body end already reported, if any (without waiting).
    pub fn try_body_end(&self) -> Option<BodyEnd> {
        self.ends.try_lock().ok()?.try_recv().ok()
    }

    /// Waits (up to `super::harness::TIMEOUT`) for the next response body to end.
    pub async fn next_body_end(&self) -> BodyEnd {
        super::harness::within(async { self.ends.lock().await.recv().await })
            .await
            .expect("the server is running")
    }
}

async fn complete(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    shared.peers.lock().push(peer);
    let request = {
        let mut requests = shared.requests.lock();
        requests.push((headers.clone(), body));
        requests.len() - 1
    };
    if shared.check_key {
        let given = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if given != format!("Bearer {GOOD_KEY}") {
            let message = format!("Incorrect API key provided: {given}");
            return error_response(401, None, &message);
        }
    }
    let reply = shared
        .script
        .lock()
        .pop_front()
        .unwrap_or_else(|| shared.fallback.clone());
    let guard = EndGuard {
        request,
        finished: Arc::new(AtomicBool::new(false)),
        ends: shared.ends.clone(),
    };
    match reply {
        Reply::Status {
            status,
            retry_after,
            message,
        } => error_response(status, retry_after, &message),
        Reply::RawStatus {
            status,
            retry_after,
            body,
        } => raw_response(status, retry_after, body),
        Reply::NoHeaders => std::future::pending().await,
        Reply::Endless { delta } => endless(content(&delta), guard),
        other => stream(events(other), guard),
    }
}

fn raw_response(status: u16, retry_after: Option<u64>, body: String) -> Response {
    let status = StatusCode::from_u16(status).expect("a valid status");
    let mut response = (status, body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", seconds.to_string().parse().expect("digits"));
    }
    response
}

/// A body that repeats `event` for as long as the client reads.
fn endless(event: String, guard: EndGuard) -> Response {
    let event = Bytes::from(event);
    let body = futures::stream::unfold(guard, move |guard| {
        let event = event.clone();
        async move { Some((Ok::<_, Infallible>(event), guard)) }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

fn error_response(status: u16, retry_after: Option<u64>, message: &str) -> Response {
    let status = StatusCode::from_u16(status).expect("a valid status");
    let body = json!({"error": {"message": message, "type": "test", "code": status.as_u16()}});
    let mut response = (status, Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", seconds.to_string().parse().expect("digits"));
    }
    response
}

/// One chunk of the first answer, with `delta` and `finish` as its finish reason.
pub fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {body}\n\n")
}

/// One piece of a streamed body: wait, then send.
type Piece = (Duration, String);

/// The pieces of a streamed reply, and whether it stalls after them.
fn events(reply: Reply) -> (Vec<Piece>, bool) {
    let now = |text: String| (Duration::ZERO, text);
    let done = || now("data: [DONE]\n\n".to_owned());
    match reply {
        Reply::Text {
            deltas,
            delay,
            usage,
        } => {
            let mut pieces: Vec<Piece> = vec![now(chunk(json!({"role": "assistant"}), None))];
            pieces.extend(
                deltas
                    .iter()
                    .map(|d| (delay, chunk(json!({"content": d}), None))),
            );
            pieces.push(now(chunk(json!({}), Some("stop"))));
            if let Some((prompt, completion)) = usage {
                let body = json!({"choices": [], "usage": {
                    "prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion}});
                pieces.push(now(format!("data: {body}\n\n")));
            }
            pieces.push(done());
            (pieces, false)
        }
        Reply::ToolCalls(calls) => {
            let mut pieces = Vec::new();
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                let (head, tail) = arguments.split_at(arguments.len() / 2);
                pieces.push(now(chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": head}}]}),
                    None,
                )));
                pieces.push(now(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}),
                    None,
                )));
            }
            pieces.push(now(chunk(json!({}), Some("tool_calls"))));
            let usage =
                json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}});
            pieces.push(now(format!("data: {usage}\n\n")));
            pieces.push(done());
            (pieces, false)
        }
        Reply::TextThenError { deltas, code } => {
            let mut pieces: Vec<Piece> = deltas
                .iter()
                .map(|d| now(chunk(json!({"content": d}), None)))
                .collect();
            let error = json!({"error": {"message": "Rate limit reached", "code": code}});
            pieces.push(now(format!("data: {error}\n\n")));
            (pieces, false)
        }
        Reply::Malformed => (
            vec![
                now(chunk(json!({"content": "fine so far"}), None)),
                now("data: {this is not json\n\n".to_owned()),
                done(),
            ],
            false,
        ),
        Reply::Stall { deltas } => (
            deltas
                .iter()
                .map(|d| now(chunk(json!({"content": d}), None)))
                .collect(),
            true,
        ),
        Reply::Raw(pieces) => (pieces.into_iter().map(now).collect(), false),
        Reply::Status { .. }
        | Reply::RawStatus { .. }
        | Reply::Endless { .. }
        | Reply::NoHeaders => unreachable!("answered without this stream"),
    }
}

/// Reports when the body it lives in is dropped: sent whole, or cut off by the client.
struct EndGuard {
    request: usize,
    finished: Arc<AtomicBool>,
    ends: mpsc::UnboundedSender<BodyEnd>,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        let _ = self.ends.send(BodyEnd {
            request: self.request,
            finished: self.finished.load(Ordering::SeqCst),
            at: Instant::now(),
        });
    }
}

/// How often a stalled stream writes a keep-alive comment; a write is what makes a closed
/// connection visible to the server promptly.
const KEEP_ALIVE: Duration = Duration::from_millis(5);
/// How long after its last event a body ends.
const END_AFTER: Duration = Duration::from_millis(10);

fn stream((pieces, stall): (Vec<Piece>, bool), guard: EndGuard) -> Response {
    let state = (VecDeque::from(pieces), guard);
    let body = futures::stream::unfold(state, move |(mut pieces, guard)| async move {
        match pieces.pop_front() {
            Some((delay, text)) => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Some((Ok::<_, Infallible>(Bytes::from(text)), (pieces, guard)))
            }
            None if stall => {
                tokio::time::sleep(KEEP_ALIVE).await;
                Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (pieces, guard)))
            }
            None => {
                // The end of the body comes a moment after the last event, as from a server that
                // flushes `[DONE]` before it closes the stream: a client that stops reading at
                // `[DONE]` leaves the body unfinished and loses the connection.
                tokio::time::sleep(END_AFTER).await;
                guard.finished.store(true, Ordering::SeqCst);
                None
            }
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .expect("a valid response")
}
