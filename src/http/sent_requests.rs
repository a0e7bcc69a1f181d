//! `GET /v1/sessions/{user}/{session}/turns/{seq}/model-requests`: the exact requests a turn's
//! agent sent its model, as the process that ran the turn kept them in memory
//! ([`crate::Runtime::sent_requests`]). For operators only: they carry the system prompt and the
//! tools' definitions.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::{session_key, Caller};
use super::error::ApiError;
use super::extract::ApiPath;
use super::gateway::Gateway;
use super::schema::{Refusals, SessionPath};
use crate::agent::SentRequest;

/// The largest seq a path may name.
const MAX_SEQ: u64 = i64::MAX as u64;

/// A turn's requests to its model, in the order sent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SentRequestsBody {
    /// The seq of the event that ends the turn.
    seq: u64,
    requests: Vec<SentRequestBody>,
}

/// One request to the model, as sent (its retries sent the same).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SentRequestBody {
    /// The turn's request it was: 1 for the first, one more per tool round (the `round` of the
    /// turn's `timing.model_requests`).
    round: u32,
    method: String,
    /// The URL, without user info or query.
    url: String,
    /// The headers turnstile set, in order; secret values read `[redacted]`.
    headers: Vec<SentHeader>,
    /// The body: the JSON sent when it was JSON and is kept whole, otherwise the text kept (see
    /// `truncated`). Secrets (the API key, the extra headers' values) read `[redacted]`.
    body: Value,
    /// The body's length as sent, in bytes.
    body_bytes: u64,
    /// Whether less than the whole body was kept (over 1 MiB, or past 4 MiB in the turn).
    truncated: bool,
}

/// One header sent.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SentHeader {
    name: String,
    value: String,
}

/// The requests the turn ending at `seq` sent its model, as this process kept them: in memory,
/// the newest turns' within a budget (16 MiB by default), so a turn another process ran, or one
/// from before a restart, is not found.
#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/turns/{seq}/model-requests",
    tag = "sessions",
    params(SessionPath, ("seq" = u64, Path, minimum = 1, maximum = 9_223_372_036_854_775_807_u64,
        description = "The seq of the event that ends the turn")),
    responses((status = 200, body = SentRequestsBody), Refusals))]
pub(crate) async fn get_sent_requests(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session, seq)): ApiPath<(String, String, u64)>,
) -> Result<Json<SentRequestsBody>, ApiError> {
    let key = session_key(&caller, user, session)?;
    caller.require_admin()?;
    if seq == 0 || seq > MAX_SEQ {
        return Err(ApiError::BadRequest(format!(
            "seq must be between 1 and {MAX_SEQ}"
        )));
    }
    let kept = gateway
        .runtime()
        .sent_requests(&key, seq)
        .await?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "this process keeps no model request of the turn of session {key} ending at event \
             {seq}: requests are kept in memory by the process that ran the turn, the newest \
             turns' only, and not across a restart; a turn whose agent sends none (echo) has none"
            ))
        })?;
    Ok(Json(SentRequestsBody {
        seq,
        requests: kept.iter().map(body_of).collect(),
    }))
}

fn body_of(sent: &SentRequest) -> SentRequestBody {
    let body = match sent.truncated {
        false => serde_json::from_str(&sent.body).ok(),
        true => None,
    };
    SentRequestBody {
        round: sent.round,
        method: sent.method.clone(),
        url: sent.url.clone(),
        headers: sent
            .headers
            .iter()
            .map(|(name, value)| SentHeader {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
        body: body.unwrap_or_else(|| Value::String(sent.body.to_string())),
        body_bytes: sent.body_bytes as u64,
        truncated: sent.truncated,
    }
}
