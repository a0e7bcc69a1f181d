//! The simplest agent: it answers with what it was told.

use async_trait::async_trait;

use super::{Agent, AgentError, TurnContext};

/// Replies with the input, unchanged. Useful for tests and for measuring the runtime itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoAgent;

#[async_trait]
impl Agent for EchoAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        Ok(turn.input())
    }
}
