//! [`Tool`]: a function the model may call during a turn.

use async_trait::async_trait;
use serde_json::{json, Value};

/// A function offered to the model: a name, a description and a JSON-schema for its arguments.
///
/// The agent sends every registered tool's definition with each request, runs the calls the model
/// asks for (several at once when it asks for several), records each call and its result in the
/// session's history, and sends the results back until the model answers. A call still running
/// when the turn is interrupted is dropped and recorded as `cancelled`.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by (letters, digits, `_` and `-`).
    fn name(&self) -> &str;

    /// What it does and when to use it, for the model.
    fn description(&self) -> &str;

    /// A JSON schema of the arguments object.
    fn parameters(&self) -> Value;

    /// Runs the tool. A [`ToolError`] is shown to the model as the result, so that it can try
    /// again or explain; it does not fail the turn.
    async fn call(&self, arguments: Value) -> Result<Value, ToolError>;
}

/// A tool's failure, shown to the model and recorded as the call's error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<&str> for ToolError {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl From<String> for ToolError {
    fn from(text: String) -> Self {
        Self(text)
    }
}

/// The definition the API takes for `tool`.
pub(super) fn definition(tool: &dyn Tool) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name(),
            "description": tool.description(),
            "parameters": tool.parameters(),
        }
    })
}
