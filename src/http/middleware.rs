//! What wraps every route: the fallbacks for unknown paths and methods, the request timeout of
//! routes that run no turn, request metrics, and the answer to a handler's panic.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::gateway::Gateway;

/// Any path no route matches.
pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound("no such route; see docs/http-api.md".into())
}

/// A route that exists, asked with another method.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Bounds a request that does not run a turn (those time themselves, see `answer`).
pub(crate) async fn timeout(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    let after = gateway.config().request_timeout;
    match tokio::time::timeout(after, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::RequestTimeout { after }.into_response(),
    }
}

/// The longest `Origin` a refusal quotes, in bytes; the rest is left out.
const MAX_QUOTED_ORIGIN: usize = 100;

/// On a server without tokens (anyone who reaches it may do anything), refuses a request
/// addressed to a name that is not loopback ([`addressed_elsewhere`]), and a request that
/// changes something — any method but GET, HEAD, OPTIONS and TRACE — when a browser says it
/// comes from a page of another origin: its `Sec-Fetch-Site` is neither `same-origin` nor `none`
/// (typed by the user), or, from a browser that sends no `Sec-Fetch-Site`, its `Origin` names
/// another host than its `Host`. Otherwise any page
/// the server's user opens could post to it (a form's body-less POST needs no JSON), clearing
/// or passivating sessions. Programs that are not browsers send neither header and pass; so do
/// the server's own pages. With tokens a browser has no credential to send, and nothing is
/// checked.
pub(crate) async fn same_origin(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    // The platforms' requests prove their sender by a secret or signature of their own.
    let from_platform = request
        .uri()
        .path()
        .starts_with(super::channel_hooks::PREFIX);
    if gateway.tokens().is_empty() && !from_platform {
        if let Some(refusal) = addressed_elsewhere(request.headers()) {
            return refusal.into_response();
        }
        if !request.method().is_safe() {
            if let Some(refusal) = from_another_origin(request.headers()) {
                return refusal.into_response();
            }
        }
    }
    next.run(request).await
}

/// Why a request to a server without tokens is refused for the name it was addressed to, if it
/// is: such a server listens on loopback only, so a `Host` that is not a loopback name
/// (`localhost`, `127.0.0.0/8`, `[::1]`, any port) means a page reached it through a name of its
/// own that resolves to loopback (DNS rebinding), where the browser takes the server for that
/// page's own origin — or a proxy exposes the open server under another name. No `Host`
/// (HTTP/1.0) passes.
fn addressed_elsewhere(headers: &HeaderMap) -> Option<ApiError> {
    let host = headers.get(header::HOST)?;
    let loopback = host.to_str().ok().is_some_and(is_loopback_name);
    if loopback {
        return None;
    }
    let host = String::from_utf8_lossy(host.as_bytes());
    Some(ApiError::Forbidden(format!(
        "a server without tokens answers only requests addressed to a loopback name \
         (localhost, 127.0.0.1, [::1]), not Host: {}; give the server tokens to reach it under \
         another name",
        cut(&host, MAX_QUOTED_ORIGIN)
    )))
}

/// Whether `host` (a `Host` header: a name or address, maybe a port) names loopback.
fn is_loopback_name(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]` or `[::1]:8080`.
        Some(rest) => match rest.split_once(']') {
            Some((address, port)) if port.is_empty() || port.starts_with(':') => address,
            _ => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a request's headers say a page of another origin sent it, if they do.
fn from_another_origin(headers: &HeaderMap) -> Option<ApiError> {
    let refused = |what: String| {
        ApiError::Forbidden(format!(
            "a server without tokens takes no request that changes anything from a page of \
             another origin ({what}); open the page from this server, or give the server tokens"
        ))
    };
    // A browser that says where the request comes from is believed: its judgement holds behind
    // a proxy that rewrites `Host`, and across a forward to another process of a cluster.
    if let Some(site) = headers.get("sec-fetch-site") {
        if matches!(site.as_bytes(), b"same-origin" | b"none") {
            return None;
        }
        let site = String::from_utf8_lossy(site.as_bytes());
        return Some(refused(format!(
            "Sec-Fetch-Site: {}",
            cut(&site, MAX_QUOTED_ORIGIN)
        )));
    }
    // An older browser says only `Origin`.
    let origin = headers.get(header::ORIGIN)?;
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.split_once("://"))
        .map(|(_, host)| host);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match (origin_host, host) {
        (Some(origin_host), Some(host)) if origin_host.eq_ignore_ascii_case(host) => None,
        _ => {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            Some(refused(format!(
                "Origin: {}",
                cut(&origin, MAX_QUOTED_ORIGIN)
            )))
        }
    }
}

/// `text` up to `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Counts requests by route and status, and times them until the response head is ready
/// (a streamed body is not included).
pub(crate) async fn record(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    // Only the methods the API uses become labels: any other string a client sends would add
    // a time series of its own, unbounded and before any token is checked.
    let method = match *request.method() {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    };
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::histogram!("turnstile_http_request_seconds", "route" => route.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(
        "turnstile_http_requests_total",
        "method" => method,
        "route" => route,
        "status" => status
    )
    .increment(1);
    response
}

/// A handler panicked: answer the documented 500 (the panic is logged, never shown) rather than
/// dropping the connection.
pub(crate) fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    ApiError::Internal(format!("a handler panicked: {detail}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn requests_of_programs_and_of_the_server_s_own_pages_pass() {
        for pairs in [
            &[("host", "127.0.0.1:8080")][..],
            &[
                ("host", "127.0.0.1:8080"),
                ("sec-fetch-site", "same-origin"),
            ],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "none")],
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            // Behind a proxy that speaks TLS: the host is what counts.
            &[("host", "chat.example"), ("origin", "https://Chat.Example")],
            // Forwarded to another process, or behind a proxy that rewrote `Host`: the
            // browser's word stands.
            &[
                ("host", "127.0.0.1:8081"),
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "same-origin"),
            ],
        ] {
            assert!(from_another_origin(&headers(pairs)).is_none(), "{pairs:?}");
        }
    }

    #[test]
    fn only_loopback_names_are_answered() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_name(host), "{host}");
            assert!(addressed_elsewhere(&headers(&[("host", host)])).is_none());
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "[::1]x",
            "",
        ] {
            assert!(!is_loopback_name(host), "{host}");
        }
        let refusal = addressed_elsewhere(&headers(&[("host", "rebound.example:8080")]));
        assert!(
            matches!(&refusal, Some(ApiError::Forbidden(m)) if m.contains("rebound.example")),
            "{refusal:?}"
        );
        assert!(addressed_elsewhere(&HeaderMap::new()).is_none(), "no Host");
    }

    #[test]
    fn requests_from_pages_of_other_origins_are_refused() {
        for pairs in [
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")][..],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:9090"),
            ],
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://evil.example"),
            ],
            &[("host", "127.0.0.1:8080"), ("origin", "null")],
            &[("origin", "http://127.0.0.1:8080")],
        ] {
            let refusal = from_another_origin(&headers(pairs)).expect("refused");
            assert!(
                matches!(&refusal, ApiError::Forbidden(m) if m.contains("another origin")),
                "{pairs:?}: {refusal:?}"
            );
        }
    }
}
