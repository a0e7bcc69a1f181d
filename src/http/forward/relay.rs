//! The HTTP client side of forwarding: one request to the owner, its answer streamed back.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, Method, Uri};
use axum::response::Response;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::FORWARDED_HEADER;
use crate::http::error::ApiError;
use crate::http::HttpConfig;

/// Time the owner gets beyond the request timeout, so that its own 504 — which says what
/// became of the turn — reaches the caller before the forwarder gives up on its own.
const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// The request headers a forwarded request carries: who speaks (the owner checks the token
/// again), what the body is, and what answer is wanted (`text/event-stream`).
const FORWARDED_REQUEST_HEADERS: [HeaderName; 3] =
    [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT];

/// Headers that describe one connection, not the answer, and are not relayed. The length is
/// left out too: the body is relayed as a stream.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
    header::CONTENT_LENGTH,
];

/// The request to relay, borrowed from the one received.
pub(super) struct Outgoing<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
}

/// Why no answer came from the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SendError {
    /// No connection could be made (the owner is down or unreachable); nothing was sent.
    Unreachable,
    /// The connection failed after the request was sent, before the answer's head.
    Failed,
    /// No answer's head within the request timeout.
    Timeout,
}

/// The pooled HTTP client requests are forwarded with; one per gateway.
#[derive(Debug, Clone)]
pub(crate) struct Forwarder {
    client: reqwest::Client,
}

/// How long an idle connection to a peer stays pooled: a third of the default idle timeout
/// (`DEFAULT_IDLE_TIMEOUT`), so that it is reused between bursts yet never outlives the peer's
/// side of it unless the peer's idle timeout was set below this.
const FORWARD_POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(25);

impl Forwarder {
    /// A client with the gateway's connect timeout. Peers are reached directly: no proxy from
    /// the environment, no redirects followed.
    pub(crate) fn new(config: &HttpConfig) -> Result<Self, ApiError> {
        reqwest::Client::builder()
            .connect_timeout(config.forward_connect_timeout)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            // Well under the peers' idle timeout (`HttpConfig::idle_timeout`): a pooled
            // connection is dropped here before its peer closes it, so a forwarded request is
            // never written onto a connection that is being closed.
            .pool_idle_timeout(FORWARD_POOL_IDLE)
            .build()
            .map(|client| Self { client })
            .map_err(|e| ApiError::Internal(format!("cannot build the forwarding client: {e}")))
    }

    /// Sends `request` to the process at `address` and answers with its status, headers and
    /// body (as a stream, each chunk relayed when it arrives).
    pub(super) async fn send(
        &self,
        address: &str,
        request: Outgoing<'_>,
        config: &HttpConfig,
    ) -> Result<Response, SendError> {
        let path = request.uri.path_and_query().map_or("/", |p| p.as_str());
        let url = format!("{}{path}", address.trim_end_matches('/'));
        let mut outgoing = self
            .client
            .request(request.method.clone(), url)
            .header(FORWARDED_HEADER, "1")
            .body(request.body);
        for name in &FORWARDED_REQUEST_HEADERS {
            for value in request.headers.get_all(name) {
                outgoing = outgoing.header(name, value);
            }
        }
        let wait = config.request_timeout + ANSWER_MARGIN;
        let answer = match tokio::time::timeout(wait, outgoing.send()).await {
            Err(_) => return Err(SendError::Timeout),
            Ok(Err(error)) if error.is_connect() || error.is_builder() => {
                tracing::debug!(%address, %error, "owner unreachable");
                return Err(SendError::Unreachable);
            }
            Ok(Err(error)) => {
                tracing::debug!(%address, %error, "forwarded request failed");
                return Err(SendError::Failed);
            }
            Ok(Ok(answer)) => answer,
        };
        let mut response = Response::builder().status(answer.status());
        let events = is_event_stream(answer.headers());
        if let Some(headers) = response.headers_mut() {
            for (name, value) in answer.headers() {
                if !HOP_BY_HOP.contains(name) {
                    headers.append(name, value.clone());
                }
            }
        }
        let body = relay_body(answer.bytes_stream().boxed(), wait, events);
        response.body(body).map_err(|_| SendError::Failed)
    }
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

type Chunks = BoxStream<'static, reqwest::Result<Bytes>>;

/// The owner's body, chunk by chunk. Silence longer than `idle` or a broken connection ends it:
/// an event stream with a last `error` event (`owner_failed`), any other body with an error
/// (the caller's connection is cut, so a truncated body is never taken for a whole one).
fn relay_body(chunks: Chunks, idle: Duration, events: bool) -> Body {
    let stream = futures::stream::unfold(Some(chunks), move |state| async move {
        let mut chunks = state?;
        let failure = match tokio::time::timeout(idle, chunks.next()).await {
            Ok(Some(Ok(bytes))) => return Some((Ok(bytes), Some(chunks))),
            Ok(None) => return None,
            Ok(Some(Err(error))) => format!("the owner's answer broke off: {error}"),
            Err(_) => format!("the owner's answer went silent for {idle:?}"),
        };
        tracing::debug!("{failure}");
        let end = if events {
            let body = ApiError::OwnerFailed {
                retry_after: Duration::from_secs(1),
            }
            .body();
            // The blank line first ends whatever event the owner left half written.
            Ok(Bytes::from(format!("\n\nevent: error\ndata: {body}\n\n")))
        } else {
            Err(std::io::Error::other(failure))
        };
        Some((end, None))
    });
    Body::from_stream(stream)
}
