//! Probes, metrics, fallbacks and the middleware every route shares.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::ApiError;
use super::gateway::Gateway;
use super::schema::Refusals;
use crate::Error;
use crate::Readiness;

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
