//! What a caller asks for and gets back: policies, options, outcomes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::parse::ParseError;
use crate::state::{InterruptReason, Seq, Usage};

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
}

/// Checks a request id: 1 to [`MAX_REQUEST_ID_BYTES`] bytes of visible ASCII (`!` to `~`).
pub(crate) fn check_request_id(id: &str) -> Result<(), String> {
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

    /// Options recalling from `user`'s memory ([`CallOptions::memory_user`]).
    pub fn with_memory_user(mut self, user: impl Into<String>) -> Self {
        self.memory_user = Some(user.into());
        self
    }
}

/// How a message was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Its turn ran to the end.
    Completed,
    /// Its turn was cut short; the output is what had been produced.
    Interrupted(InterruptReason),
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
}

/// An entry added to a session's log without running a turn ([`crate::Runtime::append`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A message from the user: later turns see it in their context like any earlier input.
    User(String),
    /// A reply of the agent, as if a turn had given it.
    Agent(String),
    /// A note from the application: in the history, never in a model's context.
    Note(String),
}

impl Entry {
    /// The entry's text.
    pub fn text(&self) -> &str {
        match self {
            Self::User(text) | Self::Agent(text) | Self::Note(text) => text,
        }
    }
}
