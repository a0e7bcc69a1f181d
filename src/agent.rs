//! The [`Agent`] trait: the user's logic for one turn, and the [`TurnContext`] it works in.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

mod echo;
mod failure;
#[cfg(feature = "mcp")]
mod mcp;
mod mock;
#[cfg(feature = "openai")]
pub(crate) mod openai;
mod turn_context;

pub use crate::error::AgentError;
pub use echo::EchoAgent;
pub(crate) use failure::stored_reason;
pub use failure::{AgentFailure, FailureKind};
#[cfg(feature = "mcp")]
pub use mcp::{McpError, McpServer, McpTools, McpToolsBuilder, McpTransport};
pub use mock::MockLlmAgent;
#[cfg(feature = "openai")]
pub use openai::{OpenAiAgent, OpenAiBuilder, OpenAiError, Tool, ToolError};
pub(crate) use turn_context::{floor_char_boundary, millis, ToolEntry, TurnRecord};
pub use turn_context::{TurnContext, TurnContextBuilder, TurnRecording};

/// Per-call attributes handed to the agent (request ids, locale, feature flags). Never persisted.
pub type Attributes = Arc<HashMap<String, Value>>;

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
}
