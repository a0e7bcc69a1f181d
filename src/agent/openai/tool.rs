//! [`Tool`]: a function the model may call during a turn.

use std::sync::Arc;

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

    /// The MCP server the tool comes from, recorded with each of its calls; `None` (the
    /// default) for a tool the application implements itself.
    fn server(&self) -> Option<&str> {
        None
    }
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

/// The tools one turn offers the model, and their definitions in the same order.
#[derive(Default)]
pub(super) struct ToolSet {
    pub tools: Vec<Arc<dyn Tool>>,
    pub definitions: Vec<Value>,
}

impl ToolSet {
    /// `tools`, with their definitions.
    pub(super) fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        let definitions = tools.iter().map(|t| definition(t.as_ref())).collect();
        Self { tools, definitions }
    }

    /// The tool named `name`.
    pub(super) fn find(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// These tools followed by `more`, leaving out any of `more` whose name is taken (by one of
    /// these or an earlier one of `more`); returns the set and the names left out.
    #[cfg(feature = "mcp")]
    pub(super) fn with(&self, more: &[Arc<dyn Tool>]) -> (Self, Vec<String>) {
        let mut tools = self.tools.clone();
        let mut definitions = self.definitions.clone();
        let mut left_out = Vec::new();
        for tool in more {
            if tools.iter().any(|t| t.name() == tool.name()) {
                left_out.push(tool.name().to_owned());
                continue;
            }
            definitions.push(definition(tool.as_ref()));
            tools.push(tool.clone());
        }
        (Self { tools, definitions }, left_out)
    }
}
