//! Helpers for the HTTP gateway's tests: a gateway over a memory runtime with known tokens,
//! requests through `Router::oneshot`, and a parser for server-sent events.

#![cfg(feature = "http")]
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;
use turnstile::{
    channel::ChannelRouter, channel::MemoryPairingStore, channel::PairingStore, http::Gateway,
    http::HttpConfig, http::Tokens, Agent, InMemoryStore, Runtime, RuntimeBuilder, Store,
};

/// An admin token.
pub const ADMIN: &str = "admin-token-000000000000";
/// A token for the user `alice`.
pub const ALICE: &str = "alice-token-000000000000";
/// A token for the user `bob`.
pub const BOB: &str = "bob-token-00000000000000";
/// A token for the user `bot` that may post to the `slack` channel.
pub const SLACK_BOT: &str = "slack-bot-token-00000000";

/// The tokens file every test gateway uses.
pub fn tokens() -> Tokens {
    Tokens::parse(&format!(
        "{ADMIN} admin\n{ALICE} user:alice\n{BOB} user:bob\n{SLACK_BOT} user:bot channels:slack\n"
    ))
    .expect("the test tokens parse")
}

/// A gateway, its runtime's store, and its pairing store.
pub struct TestGateway {
    pub gateway: Gateway,
    pub store: Arc<dyn Store>,
    pub pairings: Arc<dyn PairingStore>,
}

impl TestGateway {
    /// A gateway with the test tokens over `agent`, a memory store and memory pairings.
    pub fn new(agent: impl Agent) -> Self {
        Self::with(Runtime::builder().agent(agent), HttpConfig::default())
    }

    /// A gateway with the test tokens over a runtime from `builder` (a memory store is added).
    pub fn with(builder: RuntimeBuilder, config: HttpConfig) -> Self {
        Self::with_store(builder, Arc::new(InMemoryStore::new()), config)
    }

    /// A gateway with the test tokens over a runtime from `builder` and `store`.
    pub fn with_store(builder: RuntimeBuilder, store: Arc<dyn Store>, config: HttpConfig) -> Self {
        let pairings: Arc<dyn PairingStore> = Arc::new(MemoryPairingStore::new());
        let runtime = builder.store_arc(store.clone()).build().expect("runtime");
        let router = ChannelRouter::with_pairings_arc(runtime, pairings.clone());
        let gateway = Gateway::new(router)
            .with_tokens(tokens())
            .with_config(config);
        Self {
            gateway,
            store,
            pairings,
        }
    }

    pub fn runtime(&self) -> &Runtime {
        self.gateway.runtime()
    }

    pub fn router(&self) -> Router {
        self.gateway.router()
    }

    /// Sends one request through the router (no socket) and returns its status and JSON body
    /// (`Value::Null` when the body is not JSON).
    pub async fn send(&self, request: Request<Body>) -> (StatusCode, Value) {
        let (status, _, body) = self.send_raw(request).await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// Sends one request and returns its status, headers and body text.
    pub async fn send_raw(
        &self,
        request: Request<Body>,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = self
            .router()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("read the body");
        (
            status,
            headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }
}

/// A request with an optional bearer token and an optional JSON body.
pub fn request(
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = match body {
        Some(json) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    builder.body(body).expect("a valid request")
}

/// `POST {uri}` with a JSON body, as `token`.
pub fn post(uri: &str, token: &str, body: Value) -> Request<Body> {
    request(Method::POST, uri, Some(token), Some(body))
}

/// `GET {uri}` as `token`.
pub fn get(uri: &str, token: &str) -> Request<Body> {
    request(Method::GET, uri, Some(token), None)
}

/// `DELETE {uri}` as `token`.
pub fn delete(uri: &str, token: &str) -> Request<Body> {
    request(Method::DELETE, uri, Some(token), None)
}

/// The `(event, data)` pairs of a server-sent event stream, data parsed as JSON. Comments
/// (keep-alives) are skipped.
pub fn parse_events(text: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut name = String::from("message");
        let mut data = String::new();
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
        if !data.is_empty() {
            let value = serde_json::from_str(&data).expect("event data is JSON");
            events.push((name, value));
        }
    }
    events
}

/// The error code of an error body.
pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no error code>")
}

/// A gateway served on a real socket on 127.0.0.1, stopped through its injected shutdown.
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<
        tokio::task::JoinHandle<Result<turnstile::DrainReport, turnstile::http::ServeError>>,
    >,
}

impl Served {
    /// Serves `gateway` on a free loopback port.
    pub async fn start(gateway: Gateway) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("bound address"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(gateway.serve(listener, async move {
            let _ = rx.await;
        }));
        Self {
            base,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Fires the shutdown signal (as SIGTERM would); the server drains.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Fires the shutdown signal if needed and waits for the server to finish draining.
    pub async fn stop(mut self) -> turnstile::DrainReport {
        self.begin_shutdown();
        let task = self.task.take().expect("stopped once");
        super::harness::within(task)
            .await
            .expect("the server task ran")
            .expect("the server drained")
    }
}

/// A request builder for `path` with the bearer `token`.
pub fn client_post(
    client: &reqwest::Client,
    served: &Served,
    path: &str,
    token: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    client.post(served.url(path)).bearer_auth(token).json(&body)
}

/// Reads a server-sent event stream as it arrives.
pub struct EventReader {
    bytes: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buffer: String,
}

impl EventReader {
    pub fn new(response: reqwest::Response) -> Self {
        use futures::StreamExt;
        Self {
            bytes: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next `(event, data)`; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<(String, Value)> {
        use futures::StreamExt;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse_events(&block).into_iter().next() {
                    return Some(event);
                }
                continue;
            }
            let bytes = self.bytes.next().await?.expect("read the event stream");
            self.buffer.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
}
