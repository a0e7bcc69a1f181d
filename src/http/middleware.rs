//! What wraps every route: the fallbacks for unknown paths and methods, the request timeout of
//! routes that run no turn, request metrics, and the answer to a handler's panic.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
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
