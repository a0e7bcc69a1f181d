//! What a caller asks for and gets back: policies, options, outcomes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::parse::ParseError;
use crate::state::{
    Author, EventKind, IncompleteReason, InputDisposition, InterruptReason, OutputStatus, Seq,
    ToolCallRead, ToolStatus, Usage,
};

/// Per-call attributes handed to the agent (request ids, locale, feature flags). Never persisted.
pub type Attributes = Arc<HashMap<String, Value>>;

/// Longest accepted request id ([`CallOptions::request_id`]).
pub const MAX_REQUEST_ID_BYTES: usize = 128;

/// What happens when a message arrives for a session whose turn is still running.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OverlapPolicy {
    /// Wait in line: turns run one after another in arrival order. The library default.
    #[default]
    Queue,
    /// Latest message wins: the running turn is interrupted, every older queued message is
    /// answered [`OutcomeKind::Superseded`] without running, and this one runs next.
    Latest,
    /// Refuse at once with `Error::Busy`.
    Reject,
    /// Wait in line, and when the session is free hand every waiting `Merge` message to one turn
    /// together.
    Merge,
}

impl std::str::FromStr for OverlapPolicy {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "queue" => Ok(Self::Queue),
            "latest" => Ok(Self::Latest),
            "reject" => Ok(Self::Reject),
            "merge" => Ok(Self::Merge),
            other => Err(ParseError::new(
                "overlap policy",
                other,
                "queue, latest, reject or merge",
            )),
        }
    }
}

/// Per-call options. `CallOptions::default()` uses the runtime's settings.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Overrides the runtime's overlap policy for this message.
    pub policy: Option<OverlapPolicy>,
    /// Attributes handed to the agent for this turn; never persisted.
    pub attributes: Attributes,
    /// Overrides the runtime's turn deadline for this message.
    pub deadline: Option<Duration>,
    /// For streamed calls: interrupt the turn when the stream is dropped before it ends.
    pub cancel_on_drop: bool,
    /// Makes the call idempotent: a message whose id the session already accepted is answered
    /// with that message's outcome and never runs or is stored again (see
    /// `docs/runtime-semantics.md`, "Retries"). At most
    /// [`MAX_REQUEST_ID_BYTES`](crate::config::MAX_REQUEST_ID_BYTES) bytes of visible ASCII.
    pub request_id: Option<String>,
    /// Whose memory the turn recalls from (with a memory store): by default the session's
    /// user — for a channel chat, the chat's own memory (see [`crate::memory::memory_key`]).
    /// [`ChannelRouter`](crate::channel::ChannelRouter) sets it to a paired sender's canonical
    /// user, so that a person's memory follows them and never reaches another person's chat.
    pub memory_user: Option<String>,
    /// Interrupts this message's turn (and only it) when cancelled: at its next await point
    /// while it runs, or at once when it starts later. The turn's outcome is
    /// [`OutcomeKind::Interrupted`] with the partial output, as for
    /// [`crate::Runtime::interrupt`]; a message answered without running (a retry) is not
    /// affected.
    pub cancellation: Option<tokio_util::sync::CancellationToken>,
    /// Entries written to the session's log just before the message, in the same write as its
    /// turn, each carrying the message's request id: earlier messages, replies, tool calls and
    /// results a client brings along (an OpenAI client that resends its conversation, or answers
    /// a tool call left to it). The turn's agent sees them in its history. At most
    /// [`MAX_PRECEDING_ENTRIES`](crate::config::MAX_PRECEDING_ENTRIES), each within the
    /// runtime's `max_input_bytes`. A retry with the same request id writes them no more than
    /// its message; a message superseded before it ran is written with them; a turn that could
    /// not start (no turn permit) writes neither.
    pub preceding: Vec<Entry>,
    /// What the request said, digested (1 to [`MAX_FINGERPRINT_BYTES`] bytes of letters and
    /// digits): with a [`CallOptions::request_id`], a retry whose fingerprint differs from the
    /// first message's is refused with [`crate::Error::RequestMismatch`] rather than answered
    /// with the first message's outcome. Stored after the request id, a space between them.
    pub fingerprint: Option<String>,
    /// Refuse the message with [`crate::Error::NotFound`] when the session does not exist (it
    /// has no event, stored or being written), rather than starting it: for a front door whose
    /// sessions are made by a call of their own (an OpenAI conversation). The check is the
    /// session's own, at no cost to the caller.
    pub existing_only: bool,
}

/// Longest [`CallOptions::fingerprint`]: a digest's hex digits, and room to spare.
pub const MAX_FINGERPRINT_BYTES: usize = 64;

/// The request id a stored request id names (the part before a fingerprint), and the
/// fingerprint, if it carries one.
pub(crate) fn split_request_id(stored: &str) -> (&str, Option<&str>) {
    match stored.split_once(' ') {
        Some((id, fingerprint)) => (id, Some(fingerprint)),
        None => (stored, None),
    }
}

/// Checks a request id ([`CallOptions::request_id`]): 1 to [`MAX_REQUEST_ID_BYTES`] bytes of
/// visible ASCII (`!` to `~`); the error says so. For front doors that use a client's key before
/// the runtime sees it (the ids of OpenAI objects made from an `Idempotency-Key`).
pub fn check_request_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_REQUEST_ID_BYTES || !id.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(format!(
            "a request id must be 1 to {MAX_REQUEST_ID_BYTES} bytes of visible ASCII \
             (letters, digits, punctuation; no spaces or control characters)"
        ));
    }
    Ok(())
}

impl CallOptions {
    /// Options with this overlap policy.
    pub fn with_policy(mut self, policy: OverlapPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Options with these attributes.
    pub fn with_attributes(mut self, attributes: Attributes) -> Self {
        self.attributes = attributes;
        self
    }

    /// Options with this turn deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Interrupt the turn if the stream is dropped before it ends.
    pub fn with_cancel_on_drop(mut self) -> Self {
        self.cancel_on_drop = true;
        self
    }

    /// Options with this request id ([`CallOptions::request_id`]).
    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Options whose turn `token` interrupts ([`CallOptions::cancellation`]).
    pub fn with_cancellation(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// Options whose message brings `entries` ([`CallOptions::preceding`]).
    pub fn with_preceding(mut self, entries: Vec<Entry>) -> Self {
        self.preceding = entries;
        self
    }

    /// Options with this fingerprint ([`CallOptions::fingerprint`]).
    pub fn with_fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.fingerprint = Some(fingerprint.into());
        self
    }

    /// Options refusing the message when the session does not exist
    /// ([`CallOptions::existing_only`]).
    pub fn existing_only(mut self) -> Self {
        self.existing_only = true;
        self
    }

    /// Options recalling from `user`'s memory ([`CallOptions::memory_user`]).
    pub fn with_memory_user(mut self, user: impl Into<String>) -> Self {
        self.memory_user = Some(user.into());
        self
    }
}

/// What a turn streams to its callers before its outcome: its chunks, and its tool calls and
/// results as they happen ([`crate::StreamEvent`] carries each, then the outcome). An agent's
/// [`crate::TurnContext`] sends them; build one with a sender of these
/// ([`crate::TurnContextBuilder::stream`]).
///
/// Small: a chunk is a string, a tool event boxed, so that a stream's channel stays a few
/// hundred bytes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Streamed {
    /// A piece of output, as the agent emitted it.
    Chunk(String),
    /// The agent called a tool.
    ToolCall(Box<StreamedCall>),
    /// A tool call's result.
    ToolResult(Box<StreamedResult>),
}

/// A tool call, as a turn streams it ([`Streamed::ToolCall`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedCall {
    /// The call's id, unique in the session.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: Value,
    /// The MCP server the tool came from, if any.
    pub server: Option<String>,
    /// The caller is to run it ([`crate::TurnContext::tool_call_for_caller`]).
    pub for_caller: bool,
}

/// A tool call's result, as a turn streams it ([`Streamed::ToolResult`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedResult {
    /// The id of the call it answers.
    pub call_id: String,
    /// The result (or the error's description, when `ok` is false).
    pub result: Value,
    /// Whether the tool returned a result rather than an error.
    pub ok: bool,
}

/// How a message was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Its turn ran to the end.
    Completed,
    /// Its turn was cut short; the output is what had been produced.
    Interrupted(InterruptReason),
    /// Its turn finished, but the reply stops short: the model reached its token limit or a
    /// content filter stopped it. The output is what the model produced.
    Incomplete(IncompleteReason),
    /// The model refused to answer: the output is its refusal.
    Refused,
    /// A newer message arrived first (`Latest`); it never ran, but it is in the history.
    Superseded,
    /// It was answered together with other messages (`Merge`); the output is that turn's.
    Merged,
}

impl OutcomeKind {
    /// The lower-case name used in the HTTP API and reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Interrupted(_) => "interrupted",
            Self::Incomplete(_) => "incomplete",
            Self::Refused => "refused",
            Self::Superseded => "superseded",
            Self::Merged => "merged",
        }
    }
}

/// The answer to one message. Only returned once the turn is durable in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What became of the message.
    pub kind: OutcomeKind,
    /// The agent's output (partial when interrupted; empty when superseded).
    pub output: String,
    /// Sequence number of the event that answers the message: the turn's output event, or for a
    /// superseded message its own input event.
    pub seq: Seq,
    /// The turn's token usage, when its agent reported it (as its output event keeps it);
    /// `None` for a superseded message.
    pub usage: Option<Usage>,
    /// The turn's tool calls with their results, in the order made, as its events keep them; a
    /// call without a result was left to the caller to run
    /// ([`crate::TurnContext::tool_call_for_caller`]). Empty for most turns (no allocation).
    pub calls: Vec<ToolCallRead>,
}

/// An entry added to a session's log without running a turn ([`crate::Runtime::append`]), or
/// brought by a message to be written just before it ([`CallOptions::preceding`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A message from the user: later turns see it in their context like any earlier input.
    User(String),
    /// A reply of the agent, as if a turn had given it.
    Agent(String),
    /// A note from the application: in the history, never in a model's context.
    Note(String),
    /// A tool call, as if the agent had made it: a client that keeps its own history brings its
    /// earlier calls this way. A model sees it (with its result) in later turns' context.
    ToolCall {
        /// The id pairing the call with its result.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments, as the model gave them (a JSON object, or a string when they are not
        /// JSON).
        arguments: Value,
    },
    /// The result of a tool call in the log (or among the entries before it): how a caller
    /// answers a call that was left to it to run (a client-run tool, see
    /// [`crate::TurnContext::tool_call_for_caller`]).
    ToolResult {
        /// The id of the call it answers.
        call_id: String,
        /// What the tool returned.
        output: String,
    },
}

impl Entry {
    /// The entry's text: a message's, a note's or a tool result's output (a tool call has none).
    pub fn text(&self) -> &str {
        match self {
            Self::User(text) | Self::Agent(text) | Self::Note(text) => text,
            Self::ToolResult { output, .. } => output,
            Self::ToolCall { .. } => "",
        }
    }

    /// About how many bytes the entry takes, for the runtime's bound on input sizes.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Self::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let arguments = match arguments {
                    Value::String(text) => text.len(),
                    other => other.to_string().len(),
                };
                call_id.len() + name.len() + arguments
            }
            Self::ToolResult { call_id, output } => call_id.len() + output.len(),
            other => other.text().len(),
        }
    }

    /// Who the entry's event is by, and what it records.
    pub(crate) fn into_event(self) -> (Author, EventKind) {
        match self {
            Self::User(text) => (
                Author::User,
                EventKind::UserInput {
                    text,
                    disposition: InputDisposition::Answered,
                },
            ),
            Self::Agent(text) => (
                Author::Agent,
                EventKind::AgentOutput {
                    text,
                    status: OutputStatus::Final,
                    duration_ms: 0,
                    usage: None,
                },
            ),
            Self::Note(text) => (Author::System, EventKind::Note { text }),
            Self::ToolCall {
                call_id,
                name,
                arguments,
            } => (
                Author::Agent,
                EventKind::ToolCall {
                    call_id,
                    name,
                    arguments: Box::new(arguments),
                    server: None,
                },
            ),
            Self::ToolResult { call_id, output } => (
                Author::Tool,
                EventKind::ToolResult {
                    call_id,
                    result: Box::new(Value::String(output)),
                    status: ToolStatus::Ok,
                    duration_ms: None,
                },
            ),
        }
    }
}
