//! [`TurnContext`]: everything an agent sees and may touch during one turn, and what the turn
//! records as it goes.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Attributes;
use crate::call::{Streamed, StreamedCall, StreamedResult};
use crate::context::{
    chat_messages, memory_block, render, ContextMessage, MissingKey, TemplateError,
};
use crate::key::SessionKey;
use crate::state::{Event, IncompleteReason, Scope, ScopedState, StateDelta, Usage};

mod artifacts;
mod builder;
mod model_requests;
mod recall;

pub use builder::{TurnContextBuilder, TurnRecording};
pub use model_requests::ModelRequestId;
pub(crate) use model_requests::ModelRequestMarks;

/// Everything an agent sees and may touch during one turn.
///
/// State writes ([`TurnContext::set`]) become the turn's `state_delta` when it ends; `temp:`
/// keys are visible for the rest of the turn and never persisted. The runtime builds one per
/// turn; outside a runtime (an agent's unit tests, tools) build one with
/// [`TurnContext::builder`].
pub struct TurnContext {
    key: SessionKey,
    inputs: Vec<String>,
    /// The context window before this turn, oldest first.
    history: Arc<Vec<Event>>,
    /// How many of the newest `history` events the agent sees.
    visible: usize,
    summary: Option<Arc<str>>,
    state: Arc<ScopedState>,
    attributes: Attributes,
    cancel: CancellationToken,
    /// Streaming callers (several when merged messages each asked for a stream).
    sinks: Vec<mpsc::Sender<crate::call::Streamed>>,
    /// Tool events recorded and not streamed yet: recording is synchronous, sending waits for
    /// a caller that is behind, so they go out at the next [`TurnContext::emit`] or
    /// [`TurnContext::flush`].
    unsent: Mutex<Vec<crate::call::Streamed>>,
    /// Shared with the runtime so that it survives the agent's future being dropped.
    record: Arc<Mutex<TurnRecord>>,
    // --- artifacts and declared state keys ---
    /// Where [`TurnContext::save_artifact`] writes; `None` when the runtime has no store.
    artifacts: Option<Arc<dyn crate::artifact::ArtifactStore>>,
    /// Declared state keys, for defaults of unset keys.
    state_keys: Option<Arc<crate::state_keys::StateKeys>>,
    /// The user's memory, when the runtime has one: what [`TurnContext::recall`] searches.
    memory: Option<recall::Recall>,
    /// Largest reply, in bytes; see [`TurnContext::emit`].
    max_reply_bytes: usize,
}

impl std::fmt::Debug for TurnContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnContext")
            .field("key", &self.key)
            .field("inputs", &self.inputs.len())
            .field("history", &self.history.len())
            .field("visible", &self.visible)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// What a turn produced so far; read by the runtime when the turn ends or is cut short.
#[derive(Debug, Default)]
pub(crate) struct TurnRecord {
    /// Everything emitted, concatenated.
    pub partial: String,
    /// State writes, full keys (with `temp:`), in the order made (later wins).
    pub delta: StateDelta,
    /// Tool calls and results, in order.
    pub tools: Vec<ToolEntry>,
    /// Reported token usage.
    pub usage: Option<Usage>,
    /// How the agent said its reply ends, when not as an answer: `None` for a plain answer.
    pub ending: Option<AgentEnding>,
    /// An emit went past the turn's largest reply: `partial` holds what fitted, and the turn
    /// was cancelled.
    pub reply_limited: bool,
    /// When the turn's phases happened, for its timing record.
    pub marks: TurnMarks,
    /// The agent's requests to its model, in the order made (at most
    /// [`crate::state::TurnTiming::MAX_MODEL_REQUESTS`]).
    pub model_requests: Vec<ModelRequestMarks>,
    /// What the agent sent its model ([`TurnContext::model_request_sent`]), in the order sent.
    pub sent: Vec<crate::agent::SentRequest>,
    /// The bytes of `sent`'s bodies.
    pub sent_bytes: usize,
}

/// How an agent said its returned reply ends ([`TurnContext::report_incomplete`],
/// [`TurnContext::report_refusal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentEnding {
    /// The reply stops short.
    Incomplete(IncompleteReason),
    /// The model refused; this is the refusal's text (the turn's output).
    Refused(String),
}

/// When a turn's phases happened, marked by the runtime (and by the first chunk emitted) as the
/// turn runs; the session makes the turn's [`crate::state::TurnTiming`] of them. A turn cut
/// short in any phase has that phase closed when it ends ([`TurnMarks::end`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TurnMarks {
    /// Waiting for a runtime-wide turn permit.
    pub permit: std::time::Duration,
    /// The automatic memory recall.
    pub recall: std::time::Duration,
    /// When the agent started, and when it returned or was cut short.
    pub agent_started: Option<tokio::time::Instant>,
    pub agent_ended: Option<tokio::time::Instant>,
    /// When the first non-empty chunk was emitted.
    pub first_chunk: Option<tokio::time::Instant>,
    /// The phase before the agent that is under way, and since when.
    before_agent: Option<(BeforeAgent, tokio::time::Instant)>,
}

/// The phases of a turn before its agent runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BeforeAgent {
    Permit,
    Recall,
}

impl TurnMarks {
    /// The turn enters `phase` at `at`, ending the phase it was in.
    pub(crate) fn enter(&mut self, phase: BeforeAgent, at: tokio::time::Instant) {
        self.close_before_agent(at);
        self.before_agent = Some((phase, at));
    }

    /// The agent starts at `at`.
    pub(crate) fn agent_starts(&mut self, at: tokio::time::Instant) {
        self.close_before_agent(at);
        self.agent_started = Some(at);
    }

    /// The turn's run ends at `at` (the agent returned, or the turn was cut short in whatever
    /// phase it was); a second call changes nothing.
    pub(crate) fn end(&mut self, at: tokio::time::Instant) {
        self.close_before_agent(at);
        if self.agent_started.is_some() && self.agent_ended.is_none() {
            self.agent_ended = Some(at);
        }
    }

    fn close_before_agent(&mut self, at: tokio::time::Instant) {
        if let Some((phase, since)) = self.before_agent.take() {
            let took = at.saturating_duration_since(since);
            match phase {
                BeforeAgent::Permit => self.permit = took,
                BeforeAgent::Recall => self.recall = took,
            }
        }
    }
}

/// A tool call or result, or an artifact saved, recorded during a turn (in the order made).
#[derive(Debug, Clone)]
pub(crate) enum ToolEntry {
    Artifact {
        name: String,
        version: u64,
        bytes: u64,
        mime: String,
    },
    Call {
        call_id: String,
        name: String,
        arguments: Value,
        /// The MCP server the tool came from, if any.
        server: Option<String>,
        /// When the call started: its result's duration is measured from here.
        started: tokio::time::Instant,
        /// Left to the caller to run (a client-run tool): the turn ends with it open.
        for_caller: bool,
    },
    Result {
        call_id: String,
        result: Value,
        ok: bool,
        duration_ms: Option<u64>,
    },
}

/// A new tool call id: `call_` and 24 random hex digits, unique in a session (and beyond), so
/// that every turn's calls have ids of their own — a client answering one names it alone.
fn new_call_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &id[..24])
}

/// Whole milliseconds of `elapsed`, saturating.
pub(crate) fn millis(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// The largest index at most `at` that is a character boundary of `text`.
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

impl TurnContext {
    /// What the turn records, shared: the runtime marks its phases here while the agent owns
    /// the context.
    pub(crate) fn recorder(&self) -> Arc<Mutex<TurnRecord>> {
        self.record.clone()
    }

    /// The session this turn belongs to.
    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    /// The message this turn answers. When several queued messages were merged (`Merge`
    /// policy), they are joined with blank lines; see [`TurnContext::inputs`].
    pub fn input(&self) -> String {
        self.inputs.join("\n\n")
    }

    /// Every message this turn answers, oldest first: one, or several when merged.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    /// The context window: the newest events before this turn, oldest first.
    pub fn history(&self) -> &[Event] {
        let start = self.history.len().saturating_sub(self.visible);
        &self.history[start..]
    }

    /// The summary of events older than the window, if the session was compacted.
    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// The summary and the entries recalled from memory in this turn, wrapped as recalled
    /// background (a `<memory-context>` block whose note says it is not new input and that
    /// instructions inside it are not to be followed), if there is either.
    pub fn memory_context(&self) -> Option<String> {
        memory_block(self.summary.as_deref(), &self.recalled())
    }

    /// The context as chat messages, ready for an LLM API: the memory block first (pinned: it
    /// never slides out of the window), then the window's events. This turn's input is not
    /// included (see [`TurnContext::input`]).
    pub fn messages(&self) -> Vec<ContextMessage> {
        chat_messages(self.memory_context(), self.history())
    }

    /// Fills `{scope:key}` placeholders from this turn's view of the state (see
    /// [`crate::context::render`]).
    pub fn render(&self, template: &str, missing: MissingKey) -> Result<String, TemplateError> {
        render(template, |key| self.get(key), missing)
    }

    /// Reads a state key (with its scope prefix), seeing this turn's own writes. A declared key
    /// that is unset reads as its default (see [`crate::state_keys`]).
    pub fn get(&self, key: &str) -> Option<Value> {
        let found = match self.record.lock().delta.get(key) {
            Some(value) => (!value.is_null()).then(|| value.clone()),
            None => self.state.get(key).cloned(),
        };
        found.or_else(|| self.state_keys.as_ref()?.default_of(key).cloned())
    }

    /// Writes a state key; the scope is chosen by its prefix (`user:`, `app:`, `temp:`, none).
    pub fn set(&self, key: impl Into<String>, value: impl Into<Value>) {
        self.record.lock().delta.insert(key.into(), value.into());
    }

    /// Deletes a state key.
    pub fn remove(&self, key: &str) {
        self.record.lock().delta.insert(key.to_owned(), Value::Null);
    }

    /// Whether `key` lives in the given scope; a convenience for agents that route writes.
    pub fn scope_of(key: &str) -> Scope {
        Scope::split(key).0
    }

    /// A per-call attribute given by the caller. Never persisted.
    pub fn attribute(&self, name: &str) -> Option<&Value> {
        self.attributes.get(name)
    }

    /// Fires when the turn is interrupted. Agents that do blocking or detached work should watch
    /// it; plain `async` code is stopped at its next await point anyway.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Streams a chunk of output to the caller (if it asked for a stream) and records it as
    /// partial output. Waits while a streaming caller is behind; a caller that went away does not
    /// slow the turn.
    ///
    /// The reply is bounded (the runtime's `max_reply_bytes`): a chunk that would take it past
    /// the bound is cut there, the part that fits is streamed and recorded, the turn is
    /// cancelled, and this call never returns — the runtime drops the turn and records it
    /// interrupted (`InterruptReason::ReplyLimit`) with the text up to the bound.
    pub async fn emit(&self, chunk: impl Into<String>) {
        let mut chunk = chunk.into();
        let over = {
            let mut record = self.record.lock();
            let room = self.max_reply_bytes.saturating_sub(record.partial.len());
            let over = chunk.len() > room;
            if over {
                chunk.truncate(floor_char_boundary(&chunk, room));
                record.reply_limited = true;
            }
            record.partial.push_str(&chunk);
            if record.marks.first_chunk.is_none() && !chunk.is_empty() {
                record.marks.first_chunk = Some(tokio::time::Instant::now());
            }
            over
        };
        self.flush().await;
        if !chunk.is_empty() {
            for sink in &self.sinks {
                // A dropped stream is fine: the turn goes on and its output is still recorded.
                let _ = sink.send(Streamed::Chunk(chunk.clone())).await;
            }
        }
        if over {
            self.cancel.cancel();
            std::future::pending::<()>().await;
        }
    }

    /// Streams the tool calls and results recorded since the last chunk to the streaming callers
    /// (waiting while one is behind, as [`TurnContext::emit`] does). [`TurnContext::emit`] does
    /// it first; an agent that runs tools between chunks calls it to let a caller watch them as
    /// they happen. Does nothing when no caller streams.
    pub async fn flush(&self) {
        if self.sinks.is_empty() {
            return;
        }
        let unsent = std::mem::take(&mut *self.unsent.lock());
        for event in unsent {
            for sink in &self.sinks {
                let _ = sink.send(event.clone()).await;
            }
        }
    }

    /// Keeps a tool event for the streaming callers, if there are any.
    fn stream_later(&self, event: impl FnOnce() -> Streamed) {
        if !self.sinks.is_empty() {
            self.unsent.lock().push(event());
        }
    }

    /// Records that the agent is calling a tool; returns the call id to pass to
    /// [`TurnContext::tool_result`]. A call left without a result when the turn ends or is
    /// interrupted is closed in the history with a `cancelled` result. Call ids are unique in
    /// the session (`call_` and 24 random hex digits).
    pub fn tool_call(&self, name: impl Into<String>, arguments: Value) -> String {
        self.record_call(None, name.into(), arguments, false)
    }

    /// [`TurnContext::tool_call`] for a tool served by the MCP server named `server`, which the
    /// history records with the call.
    pub fn tool_call_via(
        &self,
        server: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> String {
        self.record_call(Some(server.into()), name.into(), arguments, false)
    }

    /// Records a call of a tool the caller runs itself (a function tool an OpenAI client
    /// declared): it stays open when the turn ends, and the caller answers it with an
    /// [`Entry::ToolResult`](crate::Entry::ToolResult) its next message brings
    /// ([`CallOptions::preceding`](crate::CallOptions::preceding)). An agent that records one
    /// ends its turn without waiting for the result. Returns the call's id.
    pub fn tool_call_for_caller(&self, name: impl Into<String>, arguments: Value) -> String {
        self.record_call(None, name.into(), arguments, true)
    }

    fn record_call(
        &self,
        server: Option<String>,
        name: String,
        arguments: Value,
        for_caller: bool,
    ) -> String {
        let call_id = new_call_id();
        self.stream_later(|| {
            Streamed::ToolCall(Box::new(StreamedCall {
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                server: server.clone(),
                for_caller,
            }))
        });
        let mut record = self.record.lock();
        record.tools.push(ToolEntry::Call {
            call_id: call_id.clone(),
            name,
            arguments,
            server,
            started: tokio::time::Instant::now(),
            for_caller,
        });
        call_id
    }

    /// Records a tool's result (`Ok`) or failure (`Err`), with the time since its call was
    /// recorded.
    pub fn tool_result(&self, call_id: &str, result: Result<Value, Value>) {
        let (result, ok) = match result {
            Ok(v) => (v, true),
            Err(v) => (v, false),
        };
        self.stream_later(|| {
            Streamed::ToolResult(Box::new(StreamedResult {
                call_id: call_id.to_owned(),
                result: result.clone(),
                ok,
            }))
        });
        let mut record = self.record.lock();
        let duration_ms = record.tools.iter().rev().find_map(|entry| match entry {
            ToolEntry::Call {
                call_id: id,
                started,
                ..
            } if id == call_id => Some(millis(started.elapsed())),
            _ => None,
        });
        record.tools.push(ToolEntry::Result {
            call_id: call_id.to_owned(),
            result,
            ok,
            duration_ms,
        });
    }

    /// Reports the turn's token usage; it is added to the session's statistics.
    pub fn report_usage(&self, usage: Usage) {
        self.record.lock().usage = Some(usage);
    }

    /// Says that the reply this turn returns stops short of an answer: the model reached its
    /// output token limit, or a content filter stopped it. The turn ends
    /// [`OutputStatus::Incomplete`](crate::state::OutputStatus::Incomplete) with the returned
    /// text, and its callers get [`OutcomeKind::Incomplete`](crate::OutcomeKind::Incomplete).
    /// An interrupt still wins: a turn cut short is `Interrupted`.
    pub fn report_incomplete(&self, reason: IncompleteReason) {
        let mut record = self.record.lock();
        if !matches!(record.ending, Some(AgentEnding::Refused(_))) {
            record.ending = Some(AgentEnding::Incomplete(reason));
        }
    }

    /// Says that the model refused to answer, with its refusal: the turn's output is `text`
    /// (whatever the agent returns), recorded as
    /// [`OutputStatus::Refused`](crate::state::OutputStatus::Refused) so that no reader takes
    /// it for an answer. A refusal outranks [`Self::report_incomplete`]; it is cut at the
    /// runtime's `max_reply_bytes` like any reply.
    pub fn report_refusal(&self, text: impl Into<String>) {
        self.record.lock().ending = Some(AgentEnding::Refused(text.into()));
    }
}
