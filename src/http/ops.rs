//! Probes, metrics, fallbacks and the middleware every route shares.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::ApiError;
use super::openapi::Refusals;
use super::Gateway;
use crate::error::Error;
use crate::runtime::Readiness;

/// A probe's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Status {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: &'static str,
}

/// `GET /healthz`: the process is up and serving. Never needs a token.
#[utoipa::path(get, path = "/healthz", tag = "operations", security(),
    responses((status = 200, body = Status)))]
pub(crate) async fn healthz() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// `GET /readyz`: 200 while the gateway can serve turns; 503 `draining` once shutdown began,
/// and 503 `store_unavailable` while the store has not answered the runtime's probes
/// ([`Runtime::readiness`](crate::Runtime::readiness)), so that a load balancer sends new work
/// elsewhere. Never needs a token.
#[utoipa::path(get, path = "/readyz", tag = "operations", security(),
    responses((status = 200, body = Status), Refusals))]
pub(crate) async fn readyz(State(gateway): State<Gateway>) -> Result<Json<Status>, ApiError> {
    match gateway.runtime().readiness() {
        Readiness::Ready => Ok(Json(Status { status: "ready" })),
        Readiness::StoreUnanswered { silent, .. } => Err(ApiError::StoreUnanswered { silent }),
        _ => Err(ApiError::Runtime(Error::Draining)),
    }
}

/// `GET /metrics`: the Prometheus text exposition. Admin only: counters reveal traffic.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition",
        content_type = "text/plain", body = String), Refusals))]
pub(crate) async fn metrics(
    State(gateway): State<Gateway>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require_admin()?;
    let handle = gateway
        .metrics()
        .ok_or_else(|| ApiError::NotFound("no metrics recorder is installed".into()))?;
    // Folds recent histogram samples in; cheap, and a scrape is when they are needed.
    handle.run_upkeep();
    let mut response = handle.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(response)
}

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
