//! The response object OpenAI's clients read: what it says besides its output ([`Shape`]), its
//! status from a turn's outcome, and its assistant message item.

use serde_json::{json, Value};

use super::super::Metadata;
use crate::call::OutcomeKind;

/// What a response object says besides its output.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub id: String,
    pub conversation: String,
    pub created_at: u64,
    pub model: String,
    pub previous: Option<String>,
    pub instructions: Option<String>,
    pub metadata: Metadata,
}

impl Shape {
    /// The response object with `status` and `output` (message items), `usage` and more.
    pub(crate) fn object(&self, status: &str, output: Vec<Value>, extra: Extra) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": extra.usage.map(|(input, output)| json!({
                "input_tokens": input,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input + output,
            })),
            "conversation": {"id": self.conversation},
            "previous_response_id": self.previous,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "error": extra.error,
            "incomplete_details": extra.incomplete.map(|reason| json!({"reason": reason})),
            "parallel_tool_calls": false,
            "tool_choice": "auto",
            "tools": [],
            "temperature": null,
            "top_p": null,
            "store": true,
            "background": false,
            "text": {"format": {"type": "text"}},
            "turnstile": extra.seq.map(|seq| json!({"seq": seq})),
        })
    }
}

/// A response object's optional parts.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// Input and output tokens.
    pub usage: Option<(u64, u64)>,
    /// `{"code", "message"}` of a failed response.
    pub error: Option<Value>,
    /// Why a response is incomplete.
    pub incomplete: Option<String>,
    /// The seq of the event in the session's log that answers the response (its own input
    /// when it was superseded), once there is one: `turnstile.seq`, as the turns route's `seq`.
    pub seq: Option<u64>,
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

pub(crate) fn reason_name(reason: crate::state::InterruptReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "interrupted".into())
}

/// The assistant message item of a response's output.
pub(crate) fn message(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The status of a response's message item.
pub(crate) fn item_status(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        _ => "incomplete",
    }
}
