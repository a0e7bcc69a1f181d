//! Operator routes (admin tokens only): the live sessions of this process, passivating one,
//! and a stream of the runtime's figures once a second. Plus `GET /v1/me`, which tells any
//! valid token what it speaks for (the pages use it after sign-in).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::gateway::Gateway;
use super::schema::{Refusals, SessionPath};
use crate::key::{validate_id, KeyPart, SessionKey};
use crate::{LiveQuery, LiveSession};

mod stats_stream;

/// The admin routes and `/v1/me`, bounded by the request timeout like every quick route (the
/// stats stream's body is not: the timeout covers a response's head only).
pub(crate) fn routes(gateway: &Gateway) -> Router<Gateway> {
    Router::new()
        .route("/v1/me", get(me))
        .route("/v1/admin/live", get(live))
        .route(
            "/v1/admin/sessions/{user}/{session}/passivate",
            post(passivate),
        )
        .route("/v1/admin/stats/stream", get(stats))
        .route_layer(axum::middleware::from_fn_with_state(
            gateway.clone(),
            super::middleware::timeout,
        ))
}

/// What a token reaches.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Me {
    /// `admin`, `user`, or `open` (a server without tokens).
    grant: &'static str,
    /// The user a user token speaks for.
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    /// The channels a user token may post to.
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<Vec<String>>,
}

/// What any valid token reaches (never the token itself).
#[utoipa::path(get, path = "/v1/me", tag = "operations",
    responses((status = 200, body = Me), Refusals))]
pub(crate) async fn me(caller: Caller) -> Json<Me> {
    Json(match caller {
        Caller::Open => Me {
            grant: "open",
            user: None,
            channels: None,
        },
        Caller::Admin => Me {
            grant: "admin",
            user: None,
            channels: None,
        },
        Caller::User { id, channels } => Me {
            grant: "user",
            user: Some(id),
            channels: Some(channels),
        },
    })
}

/// The query of `GET /v1/admin/live`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct LiveParams {
    /// Only this user's sessions: 1–256 bytes, no control characters.
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user: Option<String>,
    /// Sessions per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// The previous page's `next_cursor`.
    cursor: Option<String>,
}

/// One live session as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveRow {
    user: String,
    session: String,
    /// `starting`, `idle`, `running`, `queued` or `stopping`.
    state: &'static str,
    /// Messages waiting behind the running turn (0 unless `state` is `queued`).
    waiting: usize,
    /// Turns the session has run, as of its last answered turn.
    turns: u64,
    /// Milliseconds since it last did something.
    idle_ms: u64,
    /// That moment, in Unix milliseconds.
    last_active_ms: u64,
    /// Events the store has not acknowledged.
    unsaved: usize,
    /// Approximate bytes of its serialised events.
    bytes: u64,
}

/// A page of live sessions, in key order.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LiveList {
    sessions: Vec<LiveRow>,
    /// Pass it back as `cursor`; `null` after the last page.
    next_cursor: Option<String>,
    /// Sessions held by this process now, whatever the filter.
    total: usize,
}

/// Whether a session was asked to passivate.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Passivating {
    /// False: it was not live here (absent, starting or already stopping).
    passivating: bool,
}

impl LiveRow {
    fn of(session: LiveSession, now_ms: u64) -> Self {
        let idle_ms = u64::try_from(session.idle_for.as_millis()).unwrap_or(u64::MAX);
        Self {
            user: session.key.user_id().to_owned(),
            session: session.key.session_id().to_owned(),
            state: session.state.name(),
            waiting: match session.state {
                crate::LiveState::Queued(n) => n,
                _ => 0,
            },
            turns: session.turns,
            idle_ms,
            last_active_ms: now_ms.saturating_sub(idle_ms),
            unsaved: session.unsaved,
            bytes: session.bytes,
        }
    }
}

/// The sessions live in this process, a page at a time (admin).
#[utoipa::path(get, path = "/v1/admin/live", tag = "operations",
    params(LiveParams), responses((status = 200, body = LiveList), Refusals))]
pub(crate) async fn live(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiQuery(params): ApiQuery<LiveParams>,
) -> Result<Json<LiveList>, ApiError> {
    caller.require_admin()?;
    let limit = params.limit.unwrap_or(LiveQuery::DEFAULT_LIMIT);
    if limit == 0 || limit > LiveQuery::MAX_LIMIT {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {}",
            LiveQuery::MAX_LIMIT
        )));
    }
    if let Some(user) = &params.user {
        validate_id(user, KeyPart::User)?;
    }
    let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
    let page = gateway.runtime().live_page(&LiveQuery {
        user: params.user,
        after,
        limit,
    });
    let now = now_ms();
    let sessions: Vec<LiveRow> = page
        .sessions
        .into_iter()
        .map(|s| LiveRow::of(s, now))
        .collect();
    Ok(Json(LiveList {
        sessions,
        next_cursor: page.next.as_ref().map(encode_cursor),
        total: page.total,
    }))
}

/// Asks a session live in this process to passivate now (admin).
#[utoipa::path(post, path = "/v1/admin/sessions/{user}/{session}/passivate", tag = "operations",
    params(SessionPath), responses((status = 200, body = Passivating), Refusals))]
pub(crate) async fn passivate(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Passivating>, ApiError> {
    caller.require_admin()?;
    let key = SessionKey::new(user, session)?;
    let passivating = gateway.runtime().passivate(&key);
    Ok(Json(Passivating { passivating }))
}

/// The runtime's figures as server-sent events, one `stats` event a second (admin).
#[utoipa::path(get, path = "/v1/admin/stats/stream", tag = "operations",
    responses((status = 200, description = "`stats` events, one JSON snapshot a second",
        content_type = "text/event-stream", body = String), Refusals))]
pub(crate) async fn stats(
    State(gateway): State<Gateway>,
    caller: Caller,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, ApiError> {
    caller.require_admin()?;
    Ok(Sse::new(stats_stream::snapshots(
        gateway.runtime().clone(),
        stats_stream::PERIOD,
    )))
}

/// A cursor names the last key of a page: both ids in hexadecimal, so that any id survives a
/// query string unescaped.
fn encode_cursor(key: &SessionKey) -> String {
    key.cursor()
}

fn decode_cursor(cursor: &str) -> Result<SessionKey, ApiError> {
    SessionKey::from_cursor(cursor)
        .ok_or_else(|| ApiError::BadRequest("the cursor is not one this server gave".into()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let key = SessionKey::new("al.ice", "a/b c").unwrap();
        assert_eq!(decode_cursor(&encode_cursor(&key)).unwrap(), key);
        for bad in ["", "zz.00", "61", "61.", ".61", "6.61"] {
            assert!(decode_cursor(bad).is_err(), "{bad:?}");
        }
    }
}
