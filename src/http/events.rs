//! `GET /v1/sessions/{user}/{session}/events?from=&limit=`: a session's history, a page at a
//! time, read from the store (what was acknowledged), so any process can answer it.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::session_key;
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::gateway::Gateway;
use super::schema::{Refusals, SessionPath};
use crate::error::Error;
use crate::state::Event;
use crate::store::MAX_PAGE;

/// The largest seq a query may name.
const MAX_SEQ: u64 = i64::MAX as u64;

/// Events per page unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 100;

/// The query: the first seq wanted (default 1) and how many at most.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// The first seq wanted, at least 1 (default 1).
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_u64)]
    from: Option<u64>,
    /// Events per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// One page: the events, oldest first, and where the next page starts (`null` at the end).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventsPage {
    events: Vec<Event>,
    next_from: Option<u64>,
}

/// A page of the session's stored history, oldest first.
#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/events", tag = "sessions",
    params(SessionPath, EventsQuery), responses((status = 200, body = EventsPage), Refusals))]
pub(crate) async fn list_events(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<EventsPage>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let from = query.from.unwrap_or(1);
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    // Seqs are signed 64-bit in every store (PostgreSQL's bigint), so none lies beyond.
    if from == 0 || from > MAX_SEQ || limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!(
            "from must be between 1 and {MAX_SEQ} and limit between 1 and {MAX_PAGE}"
        )));
    }
    // One more than asked tells whether another page follows.
    let mut events = gateway
        .runtime()
        .store()
        .read_events(&key, from, limit + 1)
        .await
        .map_err(|err| Error::store(&key, err))?;
    let next_from = (events.len() > limit).then(|| {
        events.truncate(limit);
        events.last().map_or(from, |e| e.seq + 1)
    });
    Ok(Json(EventsPage { events, next_from }))
}
