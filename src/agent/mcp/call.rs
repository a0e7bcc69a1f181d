//! [`McpTool`]: one tool of an MCP server, as the agent calls it — `tools/call` within the call
//! timeout, the result turned into text the model reads and cut to its bound, every failure an
//! error result, and each call counted in the metrics.
//!
//! A call's future is dropped when its turn is interrupted (or runs out of time): rmcp then
//! sends the server `notifications/cancelled` for the request, and the call is counted
//! `cancelled`.

use std::collections::HashSet;
use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio::time::Instant;

use super::listing::ListedTool;
use super::server::Server;
use crate::agent::{floor_char_boundary, Tool, ToolError};

/// Distinct tool names one server may put in metric labels; calls of tools past them are
/// counted as `other`. Tool names come from the server, and a server whose list keeps changing
/// must not grow the metrics without end.
const MAX_TOOL_LABELS: usize = 256;

/// How calls are bounded, shared by every server of a set.
#[derive(Debug)]
pub(super) struct CallSettings {
    /// The longest wait for one `tools/call`.
    pub timeout: Duration,
    /// The longest result handed to the model, in bytes.
    pub max_result_bytes: usize,
}

/// A tool offered by an MCP server.
pub(super) struct McpTool {
    /// The server; gone once the set is shut down.
    server: Weak<Server>,
    server_name: String,
    pub listed: ListedTool,
}

impl McpTool {
    pub(super) fn new(server: Weak<Server>, listed: ListedTool) -> Self {
        let server_name = server
            .upgrade()
            .map(|s| s.name().to_owned())
            .unwrap_or_default();
        Self {
            server,
            server_name,
            listed,
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.listed.name
    }

    fn description(&self) -> &str {
        &self.listed.description
    }

    fn parameters(&self) -> Value {
        self.listed.parameters.clone()
    }

    fn server(&self) -> Option<&str> {
        Some(&self.server_name)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let Some(server) = self.server.upgrade() else {
            return Err(ToolError(format!(
                "the MCP server {:?} was shut down",
                self.server_name
            )));
        };
        let mut count = Count::new(&server, &self.listed.name);
        let (outcome, result) = call(&server, &self.listed.name, arguments).await;
        count.outcome = outcome;
        result
    }
}

/// Runs one call; returns its outcome label and the result.
async fn call(
    server: &Server,
    tool: &str,
    arguments: Value,
) -> (&'static str, Result<Value, ToolError>) {
    let failed = |outcome, text: String| (outcome, Err(ToolError(text)));
    let Value::Object(arguments) = arguments else {
        return failed(
            "error",
            format!("the arguments of {tool} must be a JSON object"),
        );
    };
    let peer = match server.peer() {
        Ok(peer) => peer,
        Err(why) => {
            return failed(
                "unavailable",
                format!(
                    "the MCP server {:?} cannot take the call: {why}",
                    server.name()
                ),
            )
        }
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let timeout = server.settings.timeout;
    let answered = match tokio::time::timeout(timeout, peer.call_tool(params)).await {
        Ok(answered) => answered,
        Err(_) => {
            return failed(
                "timeout",
                format!(
                    "the MCP server {:?} did not answer within {timeout:?} (the tool timeout); \
                     the call was cancelled",
                    server.name()
                ),
            )
        }
    };
    match answered {
        Ok(result) => {
            let is_error = result.is_error == Some(true);
            let text = result_text(
                &serde_json::to_value(&result).unwrap_or(Value::Null),
                server.settings.max_result_bytes,
            );
            if is_error {
                ("error", Err(ToolError(text)))
            } else {
                ("ok", Ok(Value::String(text)))
            }
        }
        Err(error) => {
            let (outcome, text) = describe(server, &error);
            failed(outcome, server.secrets.scrub(&text))
        }
    }
}

/// The outcome label and the message of a call that failed below the tool.
fn describe(server: &Server, error: &ServiceError) -> (&'static str, String) {
    let name = server.name();
    match error {
        ServiceError::McpError(data) => (
            "error",
            format!(
                "the MCP server {name:?} refused the call: {} (code {})",
                data.message, data.code.0
            ),
        ),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            let why = server
                .cut_reason()
                .unwrap_or_else(|| "its connection ended".to_owned());
            (
                "unavailable",
                format!(
                    "the MCP server {name:?} stopped during the call: {why}; it is being \
                     started again"
                ),
            )
        }
        ServiceError::Cancelled { reason } => (
            "error",
            format!(
                "the MCP server {name:?} cancelled the call: {}",
                reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        other => (
            "error",
            format!("the call to the MCP server {name:?} failed: {other}"),
        ),
    }
}

/// The text the model reads for a `tools/call` result: its text blocks (and the text of
/// embedded text resources) joined by line breaks, other blocks named but not included,
/// `structuredContent` when there is no content; at most `max` bytes, and saying so when cut.
pub(super) fn result_text(result: &Value, max: usize) -> String {
    let blocks = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut parts: Vec<String> = blocks.iter().map(block_text).collect();
    if parts.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            parts.push(structured.to_string());
        }
    }
    let mut text = parts.join("\n");
    if text.len() > max {
        let whole = text.len();
        text.truncate(floor_char_boundary(&text, max));
        text.push_str(&format!(
            "\n[cut: the result was {whole} bytes; the first {} are shown]",
            text.len()
        ));
    }
    text
}

/// One content block as text.
fn block_text(block: &Value) -> String {
    let str_of = |key: &str| block[key].as_str().unwrap_or("");
    match str_of("type") {
        "text" => str_of("text").to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind} ({}), {} bytes of base64, not shown]",
            str_of("mimeType"),
            str_of("data").len()
        ),
        "resource_link" => format!("[resource link: {} {}]", str_of("uri"), str_of("name")),
        "resource" => {
            let resource = &block["resource"];
            match resource["text"].as_str() {
                Some(text) => text.to_owned(),
                None => format!(
                    "[resource {} ({}), binary, not shown]",
                    resource["uri"].as_str().unwrap_or(""),
                    resource["mimeType"].as_str().unwrap_or("")
                ),
            }
        }
        other => format!("[{other} content, not shown]"),
    }
}

/// Counts a call in `turnstile_mcp_tool_calls_total` and `turnstile_mcp_tool_call_seconds`
/// when dropped: with the outcome set, or `cancelled` when the call's future was dropped first.
struct Count {
    server: String,
    tool: String,
    started: Instant,
    outcome: &'static str,
}

impl Count {
    fn new(server: &Server, tool: &str) -> Self {
        Self {
            server: server.name().to_owned(),
            tool: label(&server.labels, tool),
            started: Instant::now(),
            outcome: "cancelled",
        }
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        let (server, tool) = (self.server.clone(), self.tool.clone());
        metrics::counter!("turnstile_mcp_tool_calls_total", "server" => server.clone(),
            "tool" => tool.clone(), "outcome" => self.outcome)
        .increment(1);
        metrics::histogram!("turnstile_mcp_tool_call_seconds", "server" => server, "tool" => tool)
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// `tool` as a metric label: itself while the server has used fewer than
/// [`MAX_TOOL_LABELS`] names, `other` past them.
fn label(labels: &Mutex<HashSet<String>>, tool: &str) -> String {
    let mut labels = labels.lock();
    if labels.contains(tool) {
        return tool.to_owned();
    }
    if labels.len() < MAX_TOOL_LABELS {
        labels.insert(tool.to_owned());
        return tool.to_owned();
    }
    "other".to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_read_as_text_and_other_blocks_are_named() {
        let result = json!({"content": [
            {"type": "text", "text": "Echo: hi"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b", "mimeType": "x/y", "blob": "AA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "video"}
        ]});
        assert_eq!(
            result_text(&result, 1000),
            "Echo: hi\n[image (image/png), 4 bytes of base64, not shown]\ninside\n\
             [resource file:///b (x/y), binary, not shown]\n[resource link: file:///c c]\n\
             [video content, not shown]"
        );
        let structured = json!({"content": [], "structuredContent": {"sum": 5}});
        assert_eq!(result_text(&structured, 1000), r#"{"sum":5}"#);
    }

    #[test]
    fn a_long_result_is_cut_on_a_character_and_says_so() {
        let result = json!({"content": [{"type": "text", "text": "é".repeat(100)}]});
        let text = result_text(&result, 11);
        assert!(text.starts_with("ééééé\n[cut: the result was 200 bytes; the first 10"));
    }

    #[test]
    fn metric_labels_stop_growing_at_their_bound() {
        let labels = Mutex::new(HashSet::new());
        for i in 0..MAX_TOOL_LABELS {
            assert_eq!(label(&labels, &format!("t{i}")), format!("t{i}"));
        }
        assert_eq!(label(&labels, "t0"), "t0", "a known name keeps its label");
        assert_eq!(label(&labels, "new"), "other");
    }
}
