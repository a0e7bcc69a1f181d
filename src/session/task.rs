//! Running one turn as a child task, and turning what it produced into events.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use ractor::ActorRef;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::Instrument;

use super::{SessionMsg, TurnControl, TurnFinished};
use crate::agent::{
    floor_char_boundary, millis, stored_reason, Agent, AgentEnding, AgentFailure, BeforeAgent,
    FailureKind, ToolEntry, TurnContext, TurnRecord,
};
use crate::call::Entry;
use crate::config::RuntimeConfig;
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{
    persistable, Author, Event, EventKind, InputDisposition, InterruptReason, OutputStatus, Seq,
    ToolStatus,
};

/// How a turn's task ended.
pub(crate) enum TaskResult {
    /// The agent returned its reply.
    Completed(String),
    /// The turn was interrupted (the reason is in its [`TurnControl`], or its reply reached
    /// the runtime's bound).
    Interrupted,
    /// The agent returned an error or panicked.
    Failed(AgentFailure),
    /// No runtime-wide turn permit became free in time.
    NoPermit,
}

/// Where a turn may take a runtime-wide turn permit from (`max_concurrent_turns`), and how long
/// it may wait for one.
pub(crate) struct TurnPermits {
    pub semaphore: Arc<Semaphore>,
    pub wait: Duration,
}

/// A turn's work, boxed so that it can be polled once in place and then moved to a task.
pub(crate) type TurnWork = Pin<Box<dyn Future<Output = TaskResult> + Send>>;

/// Starts a turn: polls its work once in place, and only if the agent has to wait moves it to a
/// child task that reports back with [`SessionMsg::Finished`]. Returns the result when the agent
/// finished in that first poll, which saves two task switches and a message for agents that
/// answer without waiting.
///
/// Polling with a no-op waker first is sound: a future that returns `Pending` registers the
/// waker of its latest poll, and the child task polls it again at once with its own.
pub(crate) fn start(
    mut work: TurnWork,
    actor: &ActorRef<SessionMsg>,
    turn_id: u64,
) -> Option<TaskResult> {
    let mut cx = Context::from_waker(Waker::noop());
    match work.as_mut().poll(&mut cx) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => {
            let actor = actor.clone();
            tokio::spawn(async move {
                let result = work.await;
                // The actor may already be gone (killed); then nobody waits for this turn.
                let _ = actor.send_message(SessionMsg::Finished(TurnFinished { turn_id, result }));
            });
            None
        }
    }
}

/// Runs the agent for one turn: takes a runtime-wide turn permit if limited, enforces the deadline,
/// turns errors and panics into results, and stops at once when the turn is interrupted.
pub(crate) async fn execute(
    agent: Arc<dyn Agent>,
    ctx: TurnContext,
    control: Arc<TurnControl>,
    deadline: Option<Duration>,
    permits: Option<TurnPermits>,
) -> TaskResult {
    let token = control.token.clone();
    let recorder = ctx.recorder();
    let mark = |phase: Option<BeforeAgent>| {
        let marks = &mut recorder.lock().marks;
        match phase {
            Some(phase) => marks.enter(phase, Instant::now()),
            None => marks.agent_starts(Instant::now()),
        }
    };
    let work = async {
        let _permit = match permits {
            Some(permits) => {
                mark(Some(BeforeAgent::Permit));
                let permit = take_permit(permits)
                    .instrument(tracing::debug_span!("permit"))
                    .await;
                match permit {
                    Some(permit) => Some(permit),
                    None => return TaskResult::NoPermit,
                }
            }
            None => None,
        };
        mark(Some(BeforeAgent::Recall));
        ctx.auto_recall()
            .instrument(tracing::debug_span!("recall"))
            .await;
        mark(None);
        let agent_run = AssertUnwindSafe(agent.run(ctx))
            .catch_unwind()
            .instrument(tracing::debug_span!("agent"));
        let finished = match deadline {
            Some(limit) => tokio::time::timeout(limit, agent_run).await.ok(),
            None => Some(agent_run.await),
        };
        match finished {
            None => {
                control.interrupt(InterruptReason::Deadline);
                TaskResult::Interrupted
            }
            Some(Ok(Ok(reply))) => TaskResult::Completed(reply),
            Some(Ok(Err(err))) => TaskResult::Failed(AgentFailure::of(err.as_ref())),
            // A panic's message is the code's, not the user's: logged, not stored.
            Some(Err(panic)) => TaskResult::Failed(
                AgentFailure::new(FailureKind::Agent, FailureKind::Agent.public_reason())
                    .with_detail(panic_message(panic.as_ref())),
            ),
        }
    };
    // Cancellation wins a tie: an interrupt that arrived counts, even if the agent was done. An
    // agent that saw it first and returned within the same poll is caught by `interrupt_wins`,
    // checked here, in that poll: an interrupt that comes after (before the session recorded
    // the turn) finds the turn over and leaves its reply alone.
    let result = tokio::select! {
        biased;
        () = token.cancelled() => TaskResult::Interrupted,
        result = work => result,
    };
    // Whatever phase the turn was in when it returned or was cut short ends now.
    recorder.lock().marks.end(Instant::now());
    interrupt_wins(result, &control)
}

async fn take_permit(permits: TurnPermits) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(permit) = permits.semaphore.clone().try_acquire_owned() {
        return Some(permit);
    }
    if permits.wait.is_zero() {
        return None;
    }
    tokio::time::timeout(permits.wait, permits.semaphore.acquire_owned())
        .await
        .ok()?
        .ok()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        format!("panicked: {text}")
    } else if let Some(text) = panic.downcast_ref::<String>() {
        format!("panicked: {text}")
    } else {
        "panicked".to_owned()
    }
}

/// How a turn ends up in the log.
pub(crate) enum TurnEnd {
    /// The agent answered, or was cut short: its reply and how it ended.
    Output(String, OutputStatus),
    /// The agent failed: the failure's code and reason. The inputs and a `turn_failed` event
    /// are written; nothing else of the turn.
    Failed { code: &'static str, reason: String },
    /// Nothing of the turn ran (no turn permit was free): it leaves no trace.
    Nothing,
}

/// An interrupt that reached the turn while the agent ran wins over what the agent returned:
/// the history says it was cut short, with what had been streamed. An agent busy with a fast
/// stream sees the cancellation inside its own loop and returns (its text so far, or an error)
/// within the poll in which the interrupt arrived, before `execute`'s own check runs again;
/// `execute` looks once more as the agent returns.
pub(crate) fn interrupt_wins(result: TaskResult, control: &TurnControl) -> TaskResult {
    match result {
        TaskResult::Completed(_) | TaskResult::Failed(_) if control.token.is_cancelled() => {
            TaskResult::Interrupted
        }
        other => other,
    }
}

/// What a finished turn writes, and the error its callers get when it failed.
pub(crate) fn settle(
    result: TaskResult,
    record: &TurnRecord,
    control: &TurnControl,
    key: &SessionKey,
    config: &RuntimeConfig,
) -> (TurnEnd, Option<Error>) {
    match result {
        TaskResult::Completed(text) => {
            let (mut text, status) = match &record.ending {
                None => (text, OutputStatus::Final),
                Some(AgentEnding::Incomplete(reason)) => (text, OutputStatus::Incomplete(*reason)),
                Some(AgentEnding::Refused(refusal)) => (refusal.clone(), OutputStatus::Refused),
            };
            if text.len() <= config.max_reply_bytes {
                return (TurnEnd::Output(text, status), None);
            }
            text.truncate(floor_char_boundary(&text, config.max_reply_bytes));
            let status = match status {
                // A refusal cut short is still a refusal, not a part of an answer.
                OutputStatus::Refused => OutputStatus::Refused,
                _ => OutputStatus::Interrupted(InterruptReason::ReplyLimit),
            };
            (TurnEnd::Output(text, status), None)
        }
        TaskResult::Interrupted => {
            let reason = match record.reply_limited {
                true => InterruptReason::ReplyLimit,
                false => control.reason(),
            };
            let status = OutputStatus::Interrupted(reason);
            (TurnEnd::Output(record.partial.clone(), status), None)
        }
        TaskResult::Failed(failure) => {
            let reason = stored_reason(failure.message());
            let detail = stored_reason(failure.detail());
            tracing::warn!(
                %key,
                code = failure.kind().code(),
                %detail,
                "turn failed; recorded as failed"
            );
            let error = Error::AgentFailed {
                key: key.clone(),
                message: detail,
                kind: failure.kind(),
                retry_after: failure.retry_after(),
            };
            let code = failure.kind().code();
            (TurnEnd::Failed { code, reason }, Some(error))
        }
        TaskResult::NoPermit => (
            TurnEnd::Nothing,
            Some(Error::ConcurrencyLimitExceeded {
                limit: config.max_concurrent_turns.unwrap_or(0),
            }),
        ),
    }
}

/// One message of a turn (or superseded by it) as its events are written: the entries it
/// brought, then itself, all carrying its request id.
pub(crate) struct Message<'a> {
    /// Entries written before it (`CallOptions::preceding`).
    pub preceding: &'a [Entry],
    pub text: &'a str,
    pub request_id: Option<String>,
}

/// What one turn adds to the log, before sequence numbers are given.
pub(crate) struct TurnWrite<'a> {
    /// The messages the turn answered (several when merged).
    pub messages: &'a [Message<'a>],
    /// What the agent recorded.
    pub record: TurnRecord,
    /// How the turn ended.
    pub end: TurnEnd,
    pub duration_ms: u64,
    /// Messages superseded while the turn ran; they follow it in the log.
    pub superseded: &'a [Message<'a>],
}

/// A turn's events, numbered.
pub(crate) struct Written {
    pub events: Vec<Event>,
    /// How many of `events` are the turn's own (the rest are the superseded messages').
    pub turn_len: usize,
    /// The seq of each superseded message's own event, in order.
    pub superseded_seqs: Vec<Seq>,
}

/// The events of one turn, numbered from `next_seq`: the entries its messages brought, its
/// messages, tool calls and results (open calls closed as cancelled, but those left to the
/// caller), the output carrying the state delta — or, for a failed turn, the entries, the
/// messages and a `turn_failed` event — then each superseded message with its entries. Every
/// message's events carry its request id.
pub(crate) fn turn_events(write: TurnWrite<'_>, next_seq: Seq, now_ms: u64) -> Written {
    let mut events: Vec<Event> = Vec::with_capacity(write.messages.len() + 2);
    let mut seq = next_seq;
    let mut push = |events: &mut Vec<Event>, author, kind, id: Option<&str>| {
        let mut event = Event::new(seq, author, now_ms, kind);
        event.request_id = id.map(str::to_owned);
        events.push(event);
        seq += 1;
    };
    let disposition = if write.messages.len() > 1 {
        InputDisposition::Merged
    } else {
        InputDisposition::Answered
    };
    let message = |text: &str, disposition| EventKind::UserInput {
        text: text.to_owned(),
        disposition,
    };
    let ran = !matches!(write.end, TurnEnd::Nothing);
    if ran {
        for m in write.messages {
            for entry in m.preceding {
                let (author, kind) = entry.clone().into_event();
                push(&mut events, author, kind, m.request_id.as_deref());
            }
        }
        for m in write.messages {
            let kind = message(m.text, disposition);
            push(&mut events, Author::User, kind, m.request_id.as_deref());
        }
    }
    match write.end {
        TurnEnd::Output(text, status) => {
            for kind in tool_events(write.record.tools) {
                let author = match kind {
                    EventKind::ToolCall { .. } | EventKind::ArtifactSaved { .. } => Author::Agent,
                    _ => Author::Tool,
                };
                push(&mut events, author, kind, None);
            }
            let output = EventKind::AgentOutput {
                text,
                status,
                duration_ms: write.duration_ms,
                usage: write.record.usage,
            };
            push(&mut events, Author::Agent, output, None);
            let delta = persistable(write.record.delta);
            if !delta.is_empty() {
                if let Some(output) = events.last_mut() {
                    output.state_delta = Some(delta);
                }
            }
        }
        TurnEnd::Failed { code, reason } => {
            let failed = EventKind::TurnFailed {
                code: code.to_owned(),
                reason,
                duration_ms: write.duration_ms,
            };
            push(&mut events, Author::System, failed, None);
        }
        TurnEnd::Nothing => {}
    }
    let turn_len = events.len();
    let mut superseded_seqs = Vec::with_capacity(write.superseded.len());
    for m in write.superseded {
        for entry in m.preceding {
            let (author, kind) = entry.clone().into_event();
            push(&mut events, author, kind, m.request_id.as_deref());
        }
        let kind = message(m.text, InputDisposition::Superseded);
        push(&mut events, Author::User, kind, m.request_id.as_deref());
        superseded_seqs.push(events.last().map_or(next_seq, |e| e.seq));
    }
    Written {
        events,
        turn_len,
        superseded_seqs,
    }
}

/// Tool entries as events, with a cancelled result appended for every call left open (but
/// those left to the caller to run), so that the history stays valid for chat APIs that
/// require each call to be answered.
fn tool_events(tools: Vec<ToolEntry>) -> Vec<EventKind> {
    let mut open: Vec<(String, tokio::time::Instant)> = Vec::new();
    let mut kinds = Vec::with_capacity(tools.len());
    for entry in tools {
        match entry {
            ToolEntry::Artifact {
                name,
                version,
                bytes,
                mime,
            } => kinds.push(EventKind::ArtifactSaved {
                name,
                version,
                bytes,
                mime,
            }),
            ToolEntry::Call {
                call_id,
                name,
                arguments,
                server,
                started,
                for_caller,
            } => {
                // A call left to the caller stays open: its result comes with a later message.
                if !for_caller {
                    open.push((call_id.clone(), started));
                }
                kinds.push(EventKind::ToolCall {
                    call_id,
                    name,
                    arguments: Box::new(arguments),
                    server: server.map(String::into_boxed_str),
                });
            }
            ToolEntry::Result {
                call_id,
                result,
                ok,
                duration_ms,
            } => {
                open.retain(|(id, _)| *id != call_id);
                kinds.push(EventKind::ToolResult {
                    call_id,
                    result: Box::new(result),
                    status: if ok {
                        ToolStatus::Ok
                    } else {
                        ToolStatus::Error
                    },
                    duration_ms,
                });
            }
        }
    }
    // A cancelled call lasted until now, when its turn ended.
    kinds.extend(
        open.into_iter()
            .map(|(call_id, started)| EventKind::ToolResult {
                call_id,
                result: Box::new(serde_json::Value::Null),
                status: ToolStatus::Cancelled,
                duration_ms: Some(millis(started.elapsed())),
            }),
    );
    kinds
}

#[cfg(test)]
mod tests;
