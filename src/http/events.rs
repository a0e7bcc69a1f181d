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
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{Event, EventKind, InputDisposition, OutputStatus, Seq, ToolStatus, TurnTiming};
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
    let events = gateway
        .runtime()
        .store()
        .read_events(key, from, limit)
        .await;
    Ok(events.map_err(|err| Error::store(key, err))?)
}

/// One turn: the event that ends it, the messages it answered, its tool calls, and where its
/// time went.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TurnBody {
    /// The event that ends the turn (`agent_output` or `turn_failed`): the `seq` its callers
    /// were answered with.
    seq: Seq,
    /// `final`, `interrupted` or `failed`.
    status: &'static str,
    /// Why an interrupted turn was cut short (`requested`, `superseded`, `deadline`…), or a
    /// failed turn's code (`model_timeout`…).
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

/// Events read back from a turn's end to find its start: a turn with more events than this
/// (hundreds of tool calls) is shown with the tool calls among its last ones.
const TURN_LOOKBACK: usize = MAX_PAGE;

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
    let from = seq.saturating_sub(TURN_LOOKBACK as u64 - 1).max(1);
    let mut events = read(&gateway, &key, from, TURN_LOOKBACK).await?;
    events.retain(|event| event.seq <= seq);
    turn_ending_at(events, seq).map(Json).map_err(|why| {
        ApiError::NotFound(format!(
            "session {key} has no turn ending at event {seq}: {why}"
        ))
    })
}

/// The turn whose last event is `seq`, from the events up to it (oldest first); or why there is
/// none.
fn turn_ending_at(mut events: Vec<Event>, seq: Seq) -> Result<TurnBody, String> {
    let end = match events.pop() {
        Some(end) if end.seq == seq => end,
        _ => return Err("no such event".to_owned()),
    };
    let (status, reason, duration_ms) = match &end.kind {
        EventKind::AgentOutput {
            status: OutputStatus::Final,
            duration_ms,
            ..
        } => ("final", None, *duration_ms),
        EventKind::AgentOutput {
            status: OutputStatus::Interrupted(why),
            duration_ms,
            ..
        } => {
            let why = serde_json::to_value(why).ok();
            let why = why.as_ref().and_then(|v| v.as_str()).map(str::to_owned);
            ("interrupted", why, *duration_ms)
        }
        EventKind::TurnFailed {
            code, duration_ms, ..
        } => ("failed", Some(code.clone()), *duration_ms),
        _ => {
            return Err(
                "that event does not end a turn (an agent_output or turn_failed event does)"
                    .to_owned(),
            )
        }
    };
    // Back from the end: the tool events, then the messages (one answered, or several merged).
    let mut inputs = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for event in events.into_iter().rev() {
        match event.kind {
            EventKind::UserInput { disposition, .. }
                if disposition != InputDisposition::Superseded =>
            {
                inputs.push(event.seq);
                if disposition == InputDisposition::Answered {
                    break;
                }
            }
            _ if !inputs.is_empty() => break,
            EventKind::ToolCall {
                call_id,
                name,
                server,
                ..
            } => calls.push((call_id, name, server)),
            EventKind::ToolResult {
                call_id,
                status,
                duration_ms,
                ..
            } => results.push((call_id, status, duration_ms)),
            EventKind::ArtifactSaved { .. } => {}
            _ => break,
        }
    }
    inputs.reverse();
    calls.reverse();
    let timing = end.timing.map(|timing| *timing);
    let starts = timing.as_ref().map(|t| t.tool_start_ms.as_slice());
    let tools: Vec<ToolTiming> = calls
        .into_iter()
        .enumerate()
        .map(|(i, (call_id, name, server))| {
            let result = results.iter().find(|(id, ..)| *id == call_id);
            ToolTiming {
                status: result.map(|(_, status, _)| *status),
                duration_ms: result.and_then(|(.., ms)| *ms),
                start_ms: starts.and_then(|starts| starts.get(i).copied()),
                call_id,
                name,
                server: server.map(String::from),
            }
        })
        .collect();
    let model_ms = timing.as_ref().map(|timing| {
        let spans: Vec<(u32, u32)> = tools
            .iter()
            .filter_map(|tool| {
                let length = u32::try_from(tool.duration_ms?).unwrap_or(u32::MAX);
                Some((tool.start_ms?, length))
            })
            .collect();
        timing.own_agent_ms(&spans)
    });
    Ok(TurnBody {
        seq,
        status,
        reason,
        inputs,
        at_ms: end.at_ms,
        duration_ms,
        timing,
        model_ms,
        tools,
    })
}
