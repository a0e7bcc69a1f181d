//! `/channels/telegram/webhook`, `/channels/slack/events`, `/channels/discord/interactions`:
//! the platforms' requests, handed whole to [`crate::channel::Adapters::receive`], which checks
//! them (by the platform's secret or signature, not a bearer token) and stores their messages;
//! this layer only passes the request in and writes the answer out.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};

use super::error::ApiError;
use super::gateway::Gateway;
use crate::channel::{ReceiveError, Webhook};

/// The routes, which answer 404 `not_found` for a platform `serve --channels` does not name.
pub(crate) fn routes() -> Router<Gateway> {
    Router::new()
        .route("/channels/telegram/webhook", post(telegram))
        .route("/channels/slack/events", post(slack))
        .route("/channels/discord/interactions", post(discord))
}

/// Where the platforms' requests arrive: exempt from the same-origin rules of a token-less
/// server, as they prove their sender themselves.
pub(crate) const PREFIX: &str = "/channels/";

async fn telegram(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    receive(&gateway, "telegram", &headers, &body).await
}

async fn slack(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    receive(&gateway, "slack", &headers, &body).await
}

async fn discord(
    State(gateway): State<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    receive(&gateway, "discord", &headers, &body).await
}

async fn receive(
    gateway: &Gateway,
    channel: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Json<serde_json::Value>, ApiError> {
    let adapters = gateway
        .adapters()
        .ok_or_else(|| ReceiveError::NotConfigured(channel.to_owned()))?;
    let headers: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    let answer = adapters
        .receive(channel, Webhook::new(&headers, body))
        .await?;
    Ok(Json(answer))
}
