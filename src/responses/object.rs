//! Response objects: what a response is while it runs and once its turn is stored — its status,
//! output items, usage and error — with what its request asked for echoed back.

use serde_json::{json, Value};

use super::items::{message, output_item};
use super::request::ResponseRequest;
use super::Metadata;
use crate::call::{Outcome, OutcomeKind};
use crate::state::{Ending, InterruptReason, ToolCallRead, Turn, Usage};

/// What a response echoes of its request, and where it ran.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shape {
    pub id: String,
    pub conversation: String,
    pub created_at: u64,
    pub model: String,
    pub previous: Option<String>,
    pub instructions: Option<String>,
    pub metadata: Metadata,
    pub tools: Vec<Value>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    pub text: Option<Value>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_output_tokens: Option<u64>,
    pub background: bool,
}

impl Shape {
    /// The shape of a response to `request`.
    pub(crate) fn of(request: &ResponseRequest, model: String) -> Self {
        Self {
            model,
            previous: request.previous_response_id.clone(),
            instructions: request.instructions.clone(),
            metadata: request.metadata.clone(),
            tools: request.tools.clone(),
            tool_choice: request.tool_choice.as_ref().map(|(given, _)| given.clone()),
            parallel_tool_calls: request.parallel_tool_calls,
            text: request.text.as_ref().map(|(given, _)| given.clone()),
            temperature: request.temperature,
            top_p: request.top_p,
            max_output_tokens: request.max_output_tokens,
            background: request.background,
            ..Self::default()
        }
    }

    /// The response object with `status` and `output`, and more.
    pub(crate) fn object(&self, status: &str, output: Vec<Value>, extra: Extra) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": extra.usage.map(|u| json!({
                "input_tokens": u.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.input_tokens.saturating_add(u.output_tokens),
            })),
            "conversation": {"id": self.conversation},
            "previous_response_id": self.previous,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "error": extra.error,
            "incomplete_details": extra.incomplete.map(|reason| json!({"reason": reason})),
            "parallel_tool_calls": self.parallel_tool_calls.unwrap_or(true),
            "tool_choice": self.tool_choice.clone().unwrap_or_else(|| json!("auto")),
            "tools": self.tools,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_output_tokens,
            "store": true,
            "background": self.background,
            "text": self.text.clone().unwrap_or_else(|| json!({"format": {"type": "text"}})),
            "turnstile": extra.seq.map(|seq| json!({"seq": seq})),
        })
    }

    /// The object of a response still running (or waiting in its session's queue).
    pub(crate) fn in_progress(&self) -> Value {
        let status = if self.background {
            "queued"
        } else {
            "in_progress"
        };
        self.object(status, Vec::new(), Extra::default())
    }

    /// The object of a response whose turn ended with `outcome`; `cancelled` when a `cancel`
    /// interrupted it.
    pub(crate) fn finished(&self, outcome: &Outcome, cancelled: bool) -> Value {
        let (status, incomplete) = status_of(outcome.kind, cancelled);
        let output = match outcome.kind {
            OutcomeKind::Superseded => Vec::new(),
            _ => output_of(&outcome.calls, outcome.seq, &outcome.output, status),
        };
        let extra = Extra {
            usage: outcome.usage,
            incomplete,
            error: None,
            seq: Some(outcome.seq),
        };
        self.object(status, output, extra)
    }

    /// The object of a response whose turn failed with `code` (the error the caller got).
    pub(crate) fn failed(&self, code: &str, message: &str, seq: Option<u64>) -> Value {
        let extra = Extra {
            error: Some(json!({"code": code, "message": message})),
            seq,
            ..Extra::default()
        };
        self.object("failed", Vec::new(), extra)
    }

    /// The object of a response from its stored turn (`merged`: later messages shared it).
    pub(crate) fn stored(&self, turn: &Turn, cancelled: bool) -> Value {
        let (status, incomplete) = match &turn.ending {
            Ending::Final => ("completed", None),
            Ending::Interrupted(InterruptReason::Requested) if cancelled => ("cancelled", None),
            Ending::Interrupted(reason) => ("incomplete", Some(reason_name(*reason))),
            Ending::Failed { code, reason } => return self.failed(code, reason, Some(turn.seq)),
        };
        let extra = Extra {
            usage: turn.usage,
            incomplete,
            error: None,
            seq: Some(turn.seq),
        };
        let output = output_of(&turn.calls, turn.seq, &turn.output, status);
        self.object(status, output, extra)
    }

    /// The object of a response superseded before it ran; `seq` is its own message's.
    pub(crate) fn superseded(&self, seq: u64) -> Value {
        let extra = Extra {
            incomplete: Some("superseded".into()),
            seq: Some(seq),
            ..Extra::default()
        };
        self.object("incomplete", Vec::new(), extra)
    }
}

/// A response object's optional parts.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    pub usage: Option<Usage>,
    /// `{"code", "message"}` of a failed response.
    pub error: Option<Value>,
    /// Why a response is incomplete.
    pub incomplete: Option<String>,
    /// The seq of the event in the session's log that answers the response (its own message
    /// when it was superseded), once there is one: `turnstile.seq`, as the turns route's `seq`.
    pub seq: Option<u64>,
}

/// A response's output items: its tool calls that show (MCP calls, and calls left to the
/// client), then its message — left out when it is empty and the turn left calls to the client.
pub(crate) fn output_of(calls: &[ToolCallRead], seq: u64, text: &str, status: &str) -> Vec<Value> {
    let mut output: Vec<Value> = calls.iter().filter_map(output_item).collect();
    let leaves_calls = calls
        .iter()
        .any(|c| c.server.is_none() && c.result.is_none());
    if !(text.is_empty() && leaves_calls) {
        output.push(message(&format!("msg_{seq}"), text, item_status(status)));
    }
    output
}

/// The status of a response whose turn ended with `kind`, and why it is incomplete.
pub(crate) fn status_of(kind: OutcomeKind, cancelled: bool) -> (&'static str, Option<String>) {
    match kind {
        OutcomeKind::Completed | OutcomeKind::Merged => ("completed", None),
        OutcomeKind::Interrupted(_) if cancelled => ("cancelled", None),
        OutcomeKind::Interrupted(reason) => ("incomplete", Some(reason_name(reason))),
        OutcomeKind::Superseded => ("incomplete", Some("superseded".into())),
    }
}

/// An interrupt reason's name (`deadline`, `reply_limit`…).
pub(crate) fn reason_name(reason: InterruptReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "interrupted".into())
}

/// The status of a response's message item.
pub(crate) fn item_status(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        _ => "incomplete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ToolResultRead, ToolStatus};

    #[test]
    fn outcomes_map_to_response_statuses() {
        assert_eq!(
            status_of(OutcomeKind::Completed, false),
            ("completed", None)
        );
        assert_eq!(
            status_of(OutcomeKind::Interrupted(InterruptReason::Requested), true),
            ("cancelled", None)
        );
        assert_eq!(
            status_of(OutcomeKind::Interrupted(InterruptReason::Deadline), false),
            ("incomplete", Some("deadline".into()))
        );
    }

    #[test]
    fn mcp_calls_and_calls_left_to_the_client_are_output_items() {
        let call = |seq, server: Option<&str>, result: Option<ToolStatus>| ToolCallRead {
            seq,
            call_id: format!("call_{seq}"),
            name: "t".into(),
            arguments: json!({"a": 1}),
            server: server.map(str::to_owned),
            result: result.map(|status| ToolResultRead {
                seq: seq + 1,
                result: json!("r"),
                status,
                duration_ms: None,
            }),
        };
        let calls = [
            call(2, Some("time"), Some(ToolStatus::Ok)),
            call(4, None, Some(ToolStatus::Ok)),
            call(6, None, None),
        ];
        let output = output_of(&calls, 7, "", "completed");
        let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["mcp_call", "function_call"], "{output:#?}");
        assert_eq!(output[0]["output"], "r");
        assert_eq!(output[0]["arguments"], "{\"a\":1}");
        assert_eq!(output[1]["call_id"], "call_6");
        let said = output_of(&calls[..2], 7, "hi", "completed");
        assert_eq!(said.last().unwrap()["type"], "message");
    }
}
