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

/// Events read back from a turn's end to find its start at first: most turns are a few events.
const TURN_FIRST_LOOK: usize = 32;

/// Events read back at most: a turn with more events than this (hundreds of tool calls) is
/// shown with the tool calls among its last ones.
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
    // A short read finds most turns whole; a longer one only when it did not reach the start.
    for look in [TURN_FIRST_LOOK, TURN_LOOKBACK] {
        let from = seq.saturating_sub(look as u64 - 1).max(1);
        let mut events = read(&gateway, &key, from, look).await?;
        events.retain(|event| event.seq <= seq);
        let whole = from == 1 || look == TURN_LOOKBACK;
        let turn = turn_ending_at(events, seq).map_err(|why| {
            ApiError::NotFound(format!(
                "session {key} has no turn ending at event {seq}: {why}"
            ))
        })?;
        if whole || !turn.inputs.is_empty() {
            return Ok(Json(turn));
        }
    }
    unreachable!("the last look is always taken")
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
            // One answered message, or the merged ones: an answered message before merged
            // ones belongs to something else (a turn before, or an append).
            EventKind::UserInput {
                disposition: InputDisposition::Answered,
                ..
            } if inputs.is_empty() => {
                inputs.push(event.seq);
                break;
            }
            EventKind::UserInput {
                disposition: InputDisposition::Merged,
                ..
            } => inputs.push(event.seq),
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
    // Starts are recorded for every call of the turn; when the walk stopped short of its
    // start, the calls found are its last ones.
    let starts = timing.as_ref().map(|t| {
        let skipped = t.tool_start_ms.len().saturating_sub(calls.len());
        &t.tool_start_ms[skipped..]
    });
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::{Author, OutputStatus};

    fn event(seq: Seq, kind: EventKind) -> Event {
        Event::new(seq, Author::User, 0, kind)
    }

    fn input(seq: Seq, disposition: InputDisposition) -> Event {
        let text = format!("m{seq}");
        event(seq, EventKind::UserInput { text, disposition })
    }

    fn call(seq: Seq, id: &str) -> Event {
        let (call_id, name) = (id.to_owned(), "t".to_owned());
        let (arguments, server) = (Box::new(json!({})), None);
        event(
            seq,
            EventKind::ToolCall {
                call_id,
                name,
                arguments,
                server,
            },
        )
    }

    fn output(seq: Seq, starts: Vec<u32>) -> Event {
        let (text, status, duration_ms, usage) = (String::new(), OutputStatus::Final, 9, None);
        let mut end = event(
            seq,
            EventKind::AgentOutput {
                text,
                status,
                duration_ms,
                usage,
            },
        );
        end.timing = Some(Box::new(TurnTiming {
            agent_ms: 9,
            tool_start_ms: starts,
            ..TurnTiming::default()
        }));
        end
    }

    #[test]
    fn merged_messages_are_the_turns_and_an_answered_one_before_them_is_not() {
        let events = vec![
            input(1, InputDisposition::Answered),
            input(2, InputDisposition::Merged),
            input(3, InputDisposition::Merged),
            output(4, Vec::new()),
        ];
        let turn = turn_ending_at(events, 4).unwrap();
        assert_eq!(turn.inputs, vec![2, 3]);
    }

    #[test]
    fn a_turn_read_without_its_start_gives_its_last_calls_their_own_starts() {
        // Three calls were made; only the last two are within what was read.
        let events = vec![call(10, "b"), call(11, "c"), output(12, vec![1, 2, 3])];
        let turn = turn_ending_at(events, 12).unwrap();
        assert!(turn.inputs.is_empty());
        let starts: Vec<Option<u32>> = turn.tools.iter().map(|t| t.start_ms).collect();
        assert_eq!(starts, vec![Some(2), Some(3)]);
    }

    #[test]
    fn an_event_that_ends_no_turn_is_named() {
        let events = vec![input(1, InputDisposition::Answered)];
        let why = turn_ending_at(events, 1).err().unwrap();
        assert!(why.contains("does not end a turn"), "{why}");
        assert_eq!(
            turn_ending_at(Vec::new(), 1).err().unwrap(),
            "no such event"
        );
    }
}
