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

use super::{SessionMsg, TurnControl, TurnFinished};
use crate::agent::{Agent, ToolEntry, TurnContext, TurnRecord};
use crate::state::{
    persistable, Author, Event, EventKind, InputDisposition, InterruptReason, OutputStatus, Seq,
    ToolStatus,
};

/// How a turn's task ended.
pub(crate) enum TaskResult {
    /// The agent returned its reply.
    Completed(String),
    /// The turn was interrupted (the reason is in its [`TurnControl`]).
    Interrupted,
    /// The agent returned an error or panicked.
    Failed(String),
    /// No runtime-wide turn slot became free in time.
    NoSlot,
}

/// Where a turn may take a runtime-wide slot from, and how long it may wait.
pub(crate) struct Slots {
    pub permits: Arc<Semaphore>,
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

/// Runs the agent for one turn: takes a runtime-wide slot if limited, enforces the deadline,
/// turns errors and panics into results, and stops at once when the turn is interrupted.
pub(crate) async fn execute(
    agent: Arc<dyn Agent>,
    ctx: TurnContext,
    control: Arc<TurnControl>,
    deadline: Option<Duration>,
    slots: Option<Slots>,
) -> TaskResult {
    let token = control.token.clone();
    let work = async {
        let _slot = match slots {
            Some(slots) => match take_slot(slots).await {
                Some(permit) => Some(permit),
                None => return TaskResult::NoSlot,
            },
            None => None,
        };
        ctx.auto_recall().await;
        let agent_run = AssertUnwindSafe(agent.run(ctx)).catch_unwind();
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
            Some(Ok(Err(err))) => TaskResult::Failed(err.to_string()),
            Some(Err(panic)) => TaskResult::Failed(panic_message(panic.as_ref())),
        }
    };
    tokio::select! {
        // Cancellation wins a tie: an interrupt that arrived counts, even if the agent was done.
        biased;
        () = token.cancelled() => TaskResult::Interrupted,
        result = work => result,
    }
}

async fn take_slot(slots: Slots) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(permit) = slots.permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if slots.wait.is_zero() {
        return None;
    }
    tokio::time::timeout(slots.wait, slots.permits.acquire_owned())
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

/// What one turn adds to the log, before sequence numbers are given.
pub(crate) struct TurnWrite<'a> {
    /// The messages the turn answered (several when merged).
    pub inputs: &'a [String],
    /// What the agent recorded.
    pub record: TurnRecord,
    /// The reply and how the turn ended; `None` when the agent failed and the turn leaves no
    /// trace.
    pub output: Option<(String, OutputStatus)>,
    pub duration_ms: u64,
    /// Messages superseded while the turn ran; they follow it in the log.
    pub superseded: &'a [String],
}

/// The events of one turn, numbered from `next_seq`: inputs, tool calls and results (open calls
/// closed as cancelled), the output carrying the state delta, then superseded inputs.
pub(crate) fn turn_events(write: TurnWrite<'_>, next_seq: Seq, now_ms: u64) -> Vec<Event> {
    let mut seq = next_seq;
    let mut events = Vec::with_capacity(write.inputs.len() + write.superseded.len() + 2);
    let mut push = |author, kind| {
        events.push(Event::new(seq, author, now_ms, kind));
        seq += 1;
    };
    if let Some((text, status)) = write.output {
        let disposition = if write.inputs.len() > 1 {
            InputDisposition::Merged
        } else {
            InputDisposition::Answered
        };
        for input in write.inputs {
            push(
                Author::User,
                EventKind::UserInput {
                    text: input.clone(),
                    disposition,
                },
            );
        }
        for kind in tool_events(write.record.tools) {
            let author = match kind {
                EventKind::ToolCall { .. } | EventKind::ArtifactSaved { .. } => Author::Agent,
                _ => Author::Tool,
            };
            push(author, kind);
        }
        push(
            Author::Agent,
            EventKind::AgentOutput {
                text,
                status,
                duration_ms: write.duration_ms,
                usage: write.record.usage,
            },
        );
        let delta = persistable(write.record.delta);
        if !delta.is_empty() {
            if let Some(output) = events.last_mut() {
                output.state_delta = Some(delta);
            }
        }
    }
    for input in write.superseded {
        events.push(Event::new(
            seq,
            Author::User,
            now_ms,
            EventKind::UserInput {
                text: input.clone(),
                disposition: InputDisposition::Superseded,
            },
        ));
        seq += 1;
    }
    events
}

/// Tool entries as events, with a cancelled result appended for every call left open, so that
/// the history stays valid for chat APIs that require each call to be answered.
fn tool_events(tools: Vec<ToolEntry>) -> Vec<EventKind> {
    let mut open: Vec<String> = Vec::new();
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
            } => {
                open.push(call_id.clone());
                kinds.push(EventKind::ToolCall {
                    call_id,
                    name,
                    arguments: Box::new(arguments),
                });
            }
            ToolEntry::Result {
                call_id,
                result,
                ok,
            } => {
                open.retain(|id| *id != call_id);
                kinds.push(EventKind::ToolResult {
                    call_id,
                    result: Box::new(result),
                    status: if ok {
                        ToolStatus::Ok
                    } else {
                        ToolStatus::Error
                    },
                });
            }
        }
    }
    kinds.extend(open.into_iter().map(|call_id| EventKind::ToolResult {
        call_id,
        result: Box::new(serde_json::Value::Null),
        status: ToolStatus::Cancelled,
    }));
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record_with_open_call() -> TurnRecord {
        let mut record = TurnRecord::default();
        record.tools = vec![
            ToolEntry::Call {
                call_id: "c1".into(),
                name: "search".into(),
                arguments: json!({}),
            },
            ToolEntry::Result {
                call_id: "c1".into(),
                result: json!("ok"),
                ok: true,
            },
            ToolEntry::Call {
                call_id: "c2".into(),
                name: "fetch".into(),
                arguments: json!({}),
            },
        ];
        record.delta = [
            ("temp:x".to_owned(), json!(1)),
            ("kept".to_owned(), json!(2)),
        ]
        .into();
        record
    }

    #[test]
    fn an_interrupted_turn_closes_open_tool_calls_and_keeps_order() {
        let write = TurnWrite {
            inputs: &["hi".to_owned()],
            record: record_with_open_call(),
            output: Some((
                "par".into(),
                OutputStatus::Interrupted(InterruptReason::Requested),
            )),
            duration_ms: 3,
            superseded: &["later".to_owned()],
        };
        let events = turn_events(write, 10, 99);
        let seqs: Vec<Seq> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (10..17).collect::<Vec<_>>());
        assert!(matches!(
            &events[4].kind,
            EventKind::ToolResult { call_id, status: ToolStatus::Cancelled, .. } if call_id == "c2"
        ));
        assert!(matches!(events[5].kind, EventKind::AgentOutput { .. }));
        let delta = events[5].state_delta.as_ref().unwrap();
        assert!(
            !delta.contains_key("temp:x"),
            "temp: keys are never persisted"
        );
        assert!(matches!(
            events[6].kind,
            EventKind::UserInput {
                disposition: InputDisposition::Superseded,
                ..
            }
        ));
    }

    #[test]
    fn a_failed_turn_leaves_only_superseded_inputs() {
        let write = TurnWrite {
            inputs: &["boom".to_owned()],
            record: TurnRecord::default(),
            output: None,
            duration_ms: 0,
            superseded: &["a".to_owned()],
        };
        let events = turn_events(write, 1, 0);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].text(), Some("a"));
    }

    #[test]
    fn merged_inputs_are_marked() {
        let write = TurnWrite {
            inputs: &["a".to_owned(), "b".to_owned()],
            record: TurnRecord::default(),
            output: Some(("ab".into(), OutputStatus::Final)),
            duration_ms: 0,
            superseded: &[],
        };
        let events = turn_events(write, 1, 0);
        assert!(events[..2].iter().all(|e| matches!(
            e.kind,
            EventKind::UserInput {
                disposition: InputDisposition::Merged,
                ..
            }
        )));
    }
}
