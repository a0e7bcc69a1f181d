//! The [`Agent`] trait: the user's logic for one turn, and the [`TurnContext`] it works in.

use async_trait::async_trait;

pub(crate) mod attributes;
mod echo;
mod failure;
#[cfg(feature = "mcp")]
mod mcp;
mod mock;
#[cfg(feature = "openai")]
pub(crate) mod openai;
mod sent_request;
mod turn_context;

pub use crate::call::Attributes;
pub use attributes::{
    ATTRIBUTES, INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, PARALLEL_TOOL_CALLS_ATTRIBUTE,
    RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE, TOOLS_ATTRIBUTE, TOOL_CHOICE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
pub use echo::EchoAgent;
pub(crate) use failure::stored_reason;
pub use failure::{AgentFailure, FailureKind};
#[cfg(feature = "mcp")]
pub use mcp::{McpError, McpServer, McpTools, McpToolsBuilder, McpTransport};
pub use mock::MockLlmAgent;
#[cfg(feature = "openai")]
pub use openai::{OpenAiAgent, OpenAiBuilder, OpenAiError, Tool, ToolError, MAX_CALLER_TOOLS};
pub use sent_request::{
    SentRequest, SentRequestLog, DEFAULT_SENT_REQUEST_BYTES, MAX_SENT_BODY_BYTES,
    MAX_SENT_BYTES_PER_TURN,
};
pub(crate) use turn_context::{
    floor_char_boundary, millis, AgentEnding, BeforeAgent, ModelRequestMarks, ToolEntry, TurnMarks,
    TurnRecord,
};
pub use turn_context::{ModelRequestId, TurnContext, TurnContextBuilder, TurnRecording};

/// What an agent may fail with: any error. It fails only that turn (`Error::AgentFailed`). An
/// agent that returns an [`AgentFailure`] (or keeps one among its error's sources) fails the
/// turn with that failure's [`FailureKind`].
pub type AgentError = Box<dyn std::error::Error + Send + Sync>;

/// The code that answers a session's messages: typically an LLM call plus tools.
///
/// turnstile calls [`Agent::run`] once per turn, never concurrently for the same session, and
/// concurrently across sessions. The future may be dropped at any await point when the turn is
/// interrupted; what it streamed with [`TurnContext::emit`] and the state it set up to then are
/// kept (see `docs/runtime-semantics.md`).
#[async_trait]
pub trait Agent: Send + Sync + 'static {
    /// Runs one turn and returns the final reply.
    ///
    /// When the reply is the concatenation of the chunks already emitted, return that text too:
    /// the returned string is what the history records as the agent's output.
    ///
    /// An error fails the turn (`Error::AgentFailed`); return an [`AgentFailure`] to say what
    /// kind of failure it is (a model that timed out, refused, rate limited…).
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError>;

    /// The per-call attributes this agent acts on ([`TurnContext::attribute`]), by name. A
    /// front door that takes settings from its caller (the OpenAI routes: instructions, tools,
    /// sampling) hands each one on only when its agent acts on it, and refuses a request that
    /// asks for one it does not, instead of accepting and ignoring it. None by default.
    fn attributes(&self) -> &'static [&'static str] {
        &[]
    }

    /// The names of the tools this agent offers a model of its own (its own and its MCP
    /// servers', as they stand now): a front door refuses a caller's tool of the same name
    /// before any turn runs. None by default.
    fn tool_names(&self) -> Vec<String> {
        Vec::new()
    }
}
