//! `GET /v1/sessions/{user}/{session}/events?from=&limit=`: a session's history, a page at a
//! time, and `GET …/turns/{seq}`: one turn with where its time went. Both are read from the
//! store (what was acknowledged), so any process can answer them.

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
use crate::key::SessionKey;
use crate::state::{Ending, Event, Seq, ToolStatus, Turn, TurnTiming};
use crate::MAX_PAGE;

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
    let mut events = read(&gateway, &key, from, limit + 1).await?;
    let next_from = (events.len() > limit).then(|| {
        events.truncate(limit);
        events.last().map_or(from, |e| e.seq + 1)
    });
    Ok(Json(EventsPage { events, next_from }))
}

async fn read(
    gateway: &Gateway,
    key: &SessionKey,
    from: Seq,
    limit: usize,
) -> Result<Vec<Event>, ApiError> {
    Ok(gateway.runtime().events(key, from, limit).await?)
}

/// One turn: the event that ends it, the messages it answered, its tool calls, and where its
/// time went.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TurnBody {
    /// The event that ends the turn (`agent_output` or `turn_failed`): the `seq` its callers
    /// were answered with.
    seq: Seq,
    /// `final`, `interrupted`, `incomplete`, `refused` or `failed`.
    status: &'static str,
    /// Why an interrupted turn was cut short (`requested`, `superseded`, `deadline`…), why an
    /// incomplete one stops short (`max_tokens`, `content_filter`), or a failed turn's code
    /// (`model_timeout`…).
    reason: Option<String>,
    /// The seqs of the messages it answered (several when merged).
    inputs: Vec<Seq>,
    /// When the turn's events were recorded, in milliseconds since the Unix epoch.
    at_ms: u64,
    /// From the turn's start to its end (the phases after `queued_ms`).
    duration_ms: u64,
    /// Where the time went; `null` for turns recorded before turnstile kept it.
    timing: Option<TurnTiming>,
    /// The agent's own time (for the model agent, the model's): `agent_ms` less the time in
    /// which a tool call ran; `null` without `timing`.
    model_ms: Option<u32>,
    /// The turn's tool calls, in the order made.
    tools: Vec<ToolTiming>,
}

/// One tool call of a turn.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ToolTiming {
    call_id: String,
    name: String,
    /// The MCP server the tool came from; absent for the agent's own tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<String>,
    /// How it ended; `null` when its result is not in the log.
    status: Option<ToolStatus>,
    /// When it started, from the agent's start; `null` without `timing`.
    start_ms: Option<u32>,
    /// How long it took; `null` when not recorded.
    duration_ms: Option<u64>,
}

/// One turn of the session, named by the seq of the event that ends it (the `seq` a turn's
/// callers are answered with), with where its time went.
#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/turns/{seq}", tag = "sessions",
    params(SessionPath, ("seq" = u64, Path, minimum = 1, maximum = 9_223_372_036_854_775_807_u64,
        description = "The seq of the event that ends the turn")),
    responses((status = 200, body = TurnBody), Refusals))]
pub(crate) async fn get_turn(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session, seq)): ApiPath<(String, String, u64)>,
) -> Result<Json<TurnBody>, ApiError> {
    let key = session_key(&caller, user, session)?;
    if seq == 0 || seq > MAX_SEQ {
        return Err(ApiError::BadRequest(format!(
            "seq must be between 1 and {MAX_SEQ}"
        )));
    }
    let turn = gateway.runtime().turn(&key, seq).await?.map_err(|why| {
        ApiError::NotFound(format!(
            "session {key} has no turn ending at event {seq}: {why}"
        ))
    })?;
    Ok(Json(body_of(turn)))
}

/// The turn's body, from the turn as the log tells it.
fn body_of(turn: Turn) -> TurnBody {
    let (status, reason) = match &turn.ending {
        Ending::Final => ("final", None),
        Ending::Interrupted(why) => {
            let why = serde_json::to_value(why).ok();
            (
                "interrupted",
                why.as_ref().and_then(|v| v.as_str()).map(str::to_owned),
            )
        }
        Ending::Incomplete(why) => ("incomplete", Some(why.as_str().to_owned())),
        Ending::Refused => ("refused", None),
        Ending::Failed { code, .. } => ("failed", Some(code.clone())),
    };
    let model_ms = turn.model_ms();
    let tools = turn
        .calls
        .iter()
        .zip(turn.call_starts())
        .map(|(call, start_ms)| ToolTiming {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            server: call.server.clone(),
            status: call.result.as_ref().map(|r| r.status),
            start_ms,
            duration_ms: call.result.as_ref().and_then(|r| r.duration_ms),
        })
        .collect();
    TurnBody {
        seq: turn.seq,
        status,
        reason,
        inputs: turn.inputs,
        at_ms: turn.at_ms,
        duration_ms: turn.duration_ms,
        timing: turn.timing,
        model_ms,
        tools,
    }
}
