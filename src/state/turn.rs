//! Reading turns out of a log: which events make up a turn, how it ended, and what answered
//! each message.
//!
//! This is the one place that says it. The session answering a retry from its window, the
//! runtime's history reads (a turn by its seq, a message by its request id), OpenAI's response
//! objects and items, the model's context (failed turns left out) and `turnstile load`'s
//! verification all read the log through these functions.
//!
//! A turn is written as one append: the entries that came with its messages, its messages (one
//! `answered`, or several `merged`), its tool calls and results and saved artifacts, and the
//! event that ends it — `agent_output`, or `turn_failed` (then with nothing between the
//! messages and it). Messages superseded while it ran follow it, each on its own. Messages and
//! replies appended without a turn (`Runtime::append`) read as turns of their own only where a
//! reply follows a message.

use serde_json::Value;

use super::event::{
    Event, EventKind, IncompleteReason, InputDisposition, InterruptReason, OutputStatus, Seq,
};
use super::event::{ToolStatus, Usage};
use super::timing::TurnTiming;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The agent finished it.
    Final,
    /// It was cut short; its output is what had been produced.
    Interrupted(InterruptReason),
    /// The agent finished, but the reply stops short (a token limit, a content filter).
    Incomplete(IncompleteReason),
    /// The model refused: the output is its refusal.
    Refused,
    /// The agent (or the model behind it) failed: no output, no tool events.
    Failed {
        /// The stable code its callers were answered with (`model_timeout`…).
        code: String,
        /// What happened, as the turn's `turn_failed` event keeps it.
        reason: String,
    },
}

/// One tool call of a turn, with its result when the log holds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRead {
    /// The call's event.
    pub seq: Seq,
    /// The id pairing the call with its result (unique in the session).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as given.
    pub arguments: Value,
    /// The MCP server the tool came from; `None` for the agent's own tools and the caller's.
    pub server: Option<String>,
    /// Its result, when the turn recorded one. A call without one was handed to the caller to
    /// run (a client-run tool): its result comes with a later message.
    pub result: Option<ToolResultRead>,
}

/// A tool call's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultRead {
    /// The result's event.
    pub seq: Seq,
    /// The result, or the error's description.
    pub result: Value,
    /// How the call ended.
    pub status: ToolStatus,
    /// How long it took, when recorded.
    pub duration_ms: Option<u64>,
}

/// One turn as the log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The event that ends it (`agent_output` or `turn_failed`): the `seq` its callers were
    /// answered with.
    pub seq: Seq,
    /// How it ended.
    pub ending: Ending,
    /// The reply (partial when interrupted; empty when failed).
    pub output: String,
    /// Token usage, when the agent reported it.
    pub usage: Option<Usage>,
    /// The messages it answered (several when merged), oldest first. Empty when the events read
    /// stop short of them (a turn with more events than were read).
    pub inputs: Vec<Seq>,
    /// Its tool calls, in the order made (its last ones only when the events read stop short).
    pub calls: Vec<ToolCallRead>,
    /// When its events were recorded, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// From its start to its end.
    pub duration_ms: u64,
    /// Where its time went; `None` for turns recorded before turnstile kept it.
    pub timing: Option<TurnTiming>,
}

impl Turn {
    /// The calls left for the caller to run (no result in the turn), in order.
    pub fn open_calls(&self) -> impl Iterator<Item = &ToolCallRead> {
        self.calls.iter().filter(|call| call.result.is_none())
    }

    /// When each of [`Turn::calls`] started, from the agent's start; `None` without timing.
    /// Starts are recorded for every call of the turn, so a read that stopped short of the
    /// turn's start gives its last calls the last starts.
    pub fn call_starts(&self) -> Vec<Option<u32>> {
        let Some(timing) = &self.timing else {
            return vec![None; self.calls.len()];
        };
        let skipped = timing.tool_start_ms.len().saturating_sub(self.calls.len());
        (0..self.calls.len())
            .map(|i| timing.tool_start_ms.get(skipped + i).copied())
            .collect()
    }

    /// The agent's own time (for the model agent, the model's): `agent_ms` less the time in
    /// which a tool call ran; `None` without timing.
    pub fn model_ms(&self) -> Option<u32> {
        let timing = self.timing.as_ref()?;
        let spans: Vec<(u32, u32)> = self
            .calls
            .iter()
            .zip(self.call_starts())
            .filter_map(|(call, start)| {
                let took = call.result.as_ref()?.duration_ms?;
                Some((start?, u32::try_from(took).unwrap_or(u32::MAX)))
            })
            .collect();
        Some(timing.own_agent_ms(&spans))
    }
}

/// Why no turn ends at an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotATurn {
    /// The events given do not end with the event asked for.
    NoSuchEvent,
    /// The event is not an `agent_output` or `turn_failed` event.
    NotAnEnd,
}

impl std::fmt::Display for NotATurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NoSuchEvent => "no such event",
            Self::NotAnEnd => {
                "that event does not end a turn (an agent_output or turn_failed event does)"
            }
        })
    }
}

/// Whether `event` ends a turn.
pub fn ends_turn(event: &Event) -> bool {
    matches!(
        event.kind,
        EventKind::AgentOutput { .. } | EventKind::TurnFailed { .. }
    )
}

/// The turn whose last event is `seq`, from the events up to it, oldest first (later ones are
/// left out). The read walks back from the end: tool events and saved artifacts, then the
/// messages — one answered, or the merged ones — and stops at anything else.
pub fn turn_ending_at(events: &[Event], seq: Seq) -> Result<Turn, NotATurn> {
    let upto = events.partition_point(|event| event.seq <= seq);
    let Some((end, before)) = events[..upto].split_last() else {
        return Err(NotATurn::NoSuchEvent);
    };
    if end.seq != seq {
        return Err(NotATurn::NoSuchEvent);
    }
    let (ending, output, usage, duration_ms) = match &end.kind {
        EventKind::AgentOutput {
            text,
            status,
            duration_ms,
            usage,
        } => {
            let ending = match status {
                OutputStatus::Final => Ending::Final,
                OutputStatus::Interrupted(reason) => Ending::Interrupted(*reason),
                OutputStatus::Incomplete(reason) => Ending::Incomplete(*reason),
                OutputStatus::Refused => Ending::Refused,
            };
            (ending, text.clone(), *usage, *duration_ms)
        }
        EventKind::TurnFailed {
            code,
            reason,
            duration_ms,
        } => {
            let ending = Ending::Failed {
                code: code.clone(),
                reason: reason.clone(),
            };
            (ending, String::new(), None, *duration_ms)
        }
        _ => return Err(NotATurn::NotAnEnd),
    };
    let mut inputs = Vec::new();
    let mut calls = Vec::new();
    let mut results: Vec<(&str, ToolResultRead)> = Vec::new();
    for event in before.iter().rev() {
        match &event.kind {
            // One answered message, or the merged ones: an answered message before merged ones
            // belongs to something else (a turn before, or an append).
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
                arguments,
                server,
            } => calls.push(ToolCallRead {
                seq: event.seq,
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: (**arguments).clone(),
                server: server.as_deref().map(str::to_owned),
                result: None,
            }),
            EventKind::ToolResult {
                call_id,
                result,
                status,
                duration_ms,
            } => results.push((
                call_id.as_str(),
                ToolResultRead {
                    seq: event.seq,
                    result: (**result).clone(),
                    status: *status,
                    duration_ms: *duration_ms,
                },
            )),
            EventKind::ArtifactSaved { .. } => {}
            _ => break,
        }
    }
    inputs.reverse();
    calls.reverse();
    for call in &mut calls {
        if let Some(at) = results.iter().position(|(id, _)| *id == call.call_id) {
            call.result = Some(results.swap_remove(at).1);
        }
    }
    Ok(Turn {
        seq,
        ending,
        output,
        usage,
        inputs,
        calls,
        at_ms: end.at_ms,
        duration_ms,
        timing: end.timing.as_deref().cloned(),
    })
}

/// What answered a message, as the log tells it (see [`answer_to`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer<'a> {
    /// A newer message arrived before it ran (`Latest`): it never ran, and its own event
    /// answers it.
    Superseded,
    /// The turn ending at `end` answered it; `merged` when later messages were answered by the
    /// same turn (the last of a merged turn's messages is answered as the turn ended).
    Turn {
        /// The event that ends the turn.
        end: &'a Event,
        /// Later messages were handed to the same turn.
        merged: bool,
    },
    /// No turn answered it: it was appended without one.
    NoTurn,
    /// The events given end before its answer: its turn runs still, or more of the log must
    /// be read.
    Unread,
}

/// What answered the message at `events[at]` (a `user_input` event), from it and the events
/// after it. A turn's answer follows its messages, after the turn's tool events; a message
/// merged into a turn is followed by the turn's later messages first.
pub fn answer_to(events: &[Event], at: usize) -> Answer<'_> {
    let disposition = match &events[at].kind {
        EventKind::UserInput { disposition, .. } => *disposition,
        _ => return Answer::NoTurn,
    };
    if disposition == InputDisposition::Superseded {
        return Answer::Superseded;
    }
    let mut merged = false;
    for event in &events[at + 1..] {
        match &event.kind {
            _ if ends_turn(event) => return Answer::Turn { end: event, merged },
            EventKind::UserInput {
                disposition: InputDisposition::Merged,
                ..
            } if disposition == InputDisposition::Merged => merged = true,
            EventKind::UserInput { .. } => return Answer::NoTurn,
            _ => {}
        }
    }
    Answer::Unread
}

/// A message found by its request id, and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRead {
    /// The entries that came with the message (see `CallOptions::preceding`), then the message
    /// itself: every event that carries the request id, oldest first.
    pub events: Vec<Event>,
    /// What became of it.
    pub fate: Fate,
}

impl RequestRead {
    /// The message's own event (the last of [`RequestRead::events`]).
    pub fn message(&self) -> &Event {
        self.events
            .last()
            .expect("a request read holds its message")
    }
}

/// What became of a message (see [`RequestRead`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// A newer message arrived before it ran (`Latest`): it never ran.
    Superseded,
    /// A turn answered it.
    Answered {
        /// The turn, read whole. Boxed: the other fates carry nothing.
        turn: Box<Turn>,
        /// Later messages were handed to the same turn (it is answered `Merged`).
        merged: bool,
    },
    /// Nothing in the log answers it (yet): its turn runs, or the log was read short.
    Unanswered,
}

/// The index of the message that carries request id `id` among `events`: the last `user_input`
/// event with it (the entries that came with a message carry its id too, before it).
pub fn find_request(events: &[Event], id: &str) -> Option<usize> {
    events.iter().rposition(|event| {
        carries_request(event, id) && matches!(event.kind, EventKind::UserInput { .. })
    })
}

/// Whether `event` carries request id `id` (its stored id is `id`, or `id`, a space and the
/// request's fingerprint).
pub fn carries_request(event: &Event, id: &str) -> bool {
    event.request_id.as_deref().is_some_and(|stored| {
        stored == id
            || stored
                .strip_prefix(id)
                .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// Which of `history`'s events belong to failed turns: each `turn_failed` event, the messages
/// right before it (its turn's, answered or merged; superseded ones stand apart) and the
/// entries those messages brought (before them, with their request ids). The model's context
/// leaves them out by default: a question that was never answered, followed by the same
/// question sent again, reads to a model as a question asked twice.
pub fn in_failed_turns(history: &[Event]) -> Vec<bool> {
    let mut marked = vec![false; history.len()];
    for (at, event) in history.iter().enumerate() {
        if !matches!(event.kind, EventKind::TurnFailed { .. }) {
            continue;
        }
        marked[at] = true;
        let mut first = at;
        let mut ids: Vec<&str> = Vec::new();
        for before in (0..at).rev() {
            match &history[before].kind {
                EventKind::UserInput { disposition, .. }
                    if *disposition != InputDisposition::Superseded =>
                {
                    marked[before] = true;
                    first = before;
                    ids.extend(history[before].request_id.as_deref().map(request_of));
                }
                _ => break,
            }
        }
        for before in (0..first).rev() {
            let brought = history[before]
                .request_id
                .as_deref()
                .is_some_and(|id| ids.contains(&request_of(id)));
            if !brought {
                break;
            }
            marked[before] = true;
        }
    }
    marked
}

/// The request id a stored one names (before the fingerprint, if it carries one).
fn request_of(stored: &str) -> &str {
    stored.split_once(' ').map_or(stored, |(id, _)| id)
}

/// The tool calls of `events` (a stretch of a log), as a caller answering calls needs them:
/// every call's id, and those still open — no result answers them — in order. Calls and results
/// of failed turns do not count: a result a failed turn brought answered nothing, and its call
/// waits again.
pub fn open_calls(events: &[Event]) -> (Vec<String>, Vec<String>) {
    let failed = in_failed_turns(events);
    let mut calls: Vec<&str> = Vec::new();
    let mut answered: Vec<&str> = Vec::new();
    for (event, failed) in events.iter().zip(failed) {
        match &event.kind {
            _ if failed => {}
            EventKind::ToolCall { call_id, .. } => calls.push(call_id),
            EventKind::ToolResult { call_id, .. } => answered.push(call_id),
            _ => {}
        }
    }
    let open = calls
        .iter()
        .filter(|call| !answered.contains(call))
        .map(|call| (*call).to_owned())
        .collect();
    (calls.into_iter().map(str::to_owned).collect(), open)
}

#[cfg(test)]
mod tests;
