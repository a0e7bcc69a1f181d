//! The HTTP client side of forwarding: one request to the owner, its answer streamed back.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, Method, Uri};
use axum::response::Response;
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::http::config::HttpConfig;
use crate::http::error::ApiError;
use crate::http::headers::FORWARDED_HEADER;

/// Time the owner gets beyond the request timeout, so that its own 504 — which says what
/// became of the turn — reaches the caller before the forwarder gives up on its own.
const ANSWER_MARGIN: Duration = Duration::from_secs(1);

/// Request headers that describe the connection to this process, or that the forwarder sets
/// itself, and so are not sent on: everything else a client sent travels with the request
/// (end to end), so that a header a route reads — `Authorization` (the owner checks the token
/// again), `Content-Type`, `Accept` (JSON or events), `Idempotency-Key` (a retry through another
/// process is still recognised) — reaches the owner as the client sent it, including headers a
/// route documents later. Headers named by the request's own `Connection` header are
/// connection-specific too (RFC 9110, 7.6.1) and are left out as well.
const NOT_FORWARDED: [HeaderName; 10] = [
    header::CONNECTION,
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::EXPECT,
    HeaderName::from_static("keep-alive"),
];

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
        outgoing = outgoing.headers(end_to_end(request.headers));
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

/// The request headers to send on: all but those of the connection (see [`NOT_FORWARDED`]) and
/// the forwarding mark, which the forwarder sets itself.
fn end_to_end(received: &HeaderMap) -> HeaderMap {
    let named_by_connection: Vec<String> = received
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut sent = HeaderMap::with_capacity(received.len());
    for (name, value) in received {
        let connection_specific = NOT_FORWARDED.contains(name)
            || name.as_str() == FORWARDED_HEADER
            || named_by_connection.iter().any(|n| n == name.as_str());
        if !connection_specific {
            sent.append(name, value.clone());
        }
    }
    sent
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

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn end_to_end_headers_travel_and_connection_headers_stay() {
        let received = headers(&[
            ("authorization", "Bearer t"),
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            ("idempotency-key", "k-1"),
            ("x-custom", "a"),
            ("x-custom", "b"),
            ("host", "10.0.0.1:8080"),
            ("content-length", "12"),
            ("connection", "keep-alive, x-hop"),
            ("keep-alive", "timeout=5"),
            ("x-hop", "1"),
            ("te", "trailers"),
            ("x-turnstile-forwarded", "1"),
        ]);
        let sent = end_to_end(&received);
        for name in ["authorization", "content-type", "accept", "idempotency-key"] {
            assert_eq!(sent.get(name), received.get(name), "{name} travels");
        }
        let custom: Vec<_> = sent.get_all("x-custom").iter().collect();
        assert_eq!(
            custom,
            ["a", "b"],
            "repeated headers keep every value in order"
        );
        for name in [
            "host",
            "content-length",
            "connection",
            "keep-alive",
            "x-hop",
            "te",
        ] {
            assert!(
                !sent.contains_key(name),
                "{name} is the connection's, not sent on"
            );
        }
        assert!(
            !sent.contains_key(FORWARDED_HEADER),
            "the mark is set by the forwarder, never copied"
        );
    }
}
