//! Response objects: what a response is while it runs and once its turn is stored — its status,
//! output items, usage and error — with what its request asked for echoed back.

use std::sync::Arc;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Value};

use super::items::{message, output_item, refusal};
use super::request::ResponseRequest;
use super::Metadata;
use crate::call::{Outcome, OutcomeKind};
use crate::state::{Ending, IncompleteReason, InterruptReason, ToolCallRead, Turn, Usage};

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
    pub(crate) fn object(
        self: &Arc<Self>,
        status: &'static str,
        output: Vec<OutputItem>,
        extra: Extra,
    ) -> ResponseObject {
        ResponseObject {
            shape: self.clone(),
            status,
            output: output.into(),
            extra,
        }
    }

    /// The object of a response still running (or waiting in its session's queue).
    pub(crate) fn in_progress(self: &Arc<Self>) -> ResponseObject {
        self.object("in_progress", Vec::new(), Extra::default())
    }

    /// The object of a background response as created: `queued`.
    pub(crate) fn queued(self: &Arc<Self>) -> ResponseObject {
        self.object("queued", Vec::new(), Extra::default())
    }

    /// The object of a response whose turn ended with `outcome`; `cancelled` when a `cancel`
    /// interrupted it.
    pub(crate) fn finished(self: &Arc<Self>, outcome: &Outcome, cancelled: bool) -> ResponseObject {
        let (status, incomplete) = status_of(outcome.kind, cancelled);
        let output = match outcome.kind {
            OutcomeKind::Superseded => Vec::new(),
            kind => {
                let said = Said::of(&outcome.output, kind == OutcomeKind::Refused);
                output_of(&outcome.calls, outcome.seq, said, status)
            }
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
    pub(crate) fn failed(
        self: &Arc<Self>,
        code: &str,
        message: &str,
        seq: Option<u64>,
    ) -> ResponseObject {
        let extra = Extra {
            error: Some((code.to_owned(), message.to_owned())),
            seq,
            ..Extra::default()
        };
        self.object("failed", Vec::new(), extra)
    }

    /// The object of a response from its stored turn (`merged`: later messages shared it).
    pub(crate) fn stored(self: &Arc<Self>, turn: &Turn) -> ResponseObject {
        let (status, incomplete) = match &turn.ending {
            Ending::Final => ("completed", None),
            // Cancel is interrupt: a response its cancel (or an interrupt) cut short reads
            // as cancelled, also once it is read back from the log.
            Ending::Interrupted(InterruptReason::Requested) => ("cancelled", None),
            Ending::Interrupted(reason) => ("incomplete", Some(reason_name(*reason))),
            Ending::Incomplete(reason) => ("incomplete", Some(incomplete_name(*reason).into())),
            Ending::Refused => ("completed", None),
            Ending::Failed { code, reason } => return self.failed(code, reason, Some(turn.seq)),
        };
        let extra = Extra {
            usage: turn.usage,
            incomplete,
            error: None,
            seq: Some(turn.seq),
        };
        let said = Said::of(&turn.output, turn.ending == Ending::Refused);
        let output = output_of(&turn.calls, turn.seq, said, status);
        self.object(status, output, extra)
    }

    /// The object of a response superseded before it ran; `seq` is its own message's.
    pub(crate) fn superseded(self: &Arc<Self>, seq: u64) -> ResponseObject {
        let extra = Extra {
            incomplete: Some("superseded".into()),
            seq: Some(seq),
            ..Extra::default()
        };
        self.object("incomplete", Vec::new(), extra)
    }
}

/// A response object's optional parts.
#[derive(Debug, Default, Clone)]
pub(crate) struct Extra {
    pub usage: Option<Usage>,
    /// The code and message of a failed response.
    pub error: Option<(String, String)>,
    /// Why a response is incomplete.
    pub incomplete: Option<String>,
    /// The seq of the event in the session's log that answers the response (its own message
    /// when it was superseded), once there is one: `turnstile.seq`, as the turns route's `seq`.
    pub seq: Option<u64>,
}

/// A response object, as OpenAI's API shows it: serialized straight from its parts (what its
/// request asked for is shared, not copied), with no JSON tree built in between.
#[derive(Debug, Clone)]
pub struct ResponseObject {
    shape: Arc<Shape>,
    status: &'static str,
    /// Shared: the final object is kept for whoever asks while the response is still known as
    /// running, and handed to whoever waits, without copying its items.
    output: Arc<[OutputItem]>,
    extra: Extra,
}

/// An output item: the assistant's message, typed (every response has one, and it is written
/// straight out), or another item as JSON.
#[derive(Debug, Clone)]
pub(crate) enum OutputItem {
    Message {
        id: String,
        text: String,
        status: &'static str,
    },
    Other(Value),
}

/// What a turn's output says: an answer's text, or the model's refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said<'a> {
    Text(&'a str),
    Refusal(&'a str),
}

impl<'a> Said<'a> {
    /// The output `text` of a turn, a refusal when `refused`.
    pub(crate) fn of(text: &'a str, refused: bool) -> Self {
        match refused {
            true => Self::Refusal(text),
            false => Self::Text(text),
        }
    }
}

impl OutputItem {
    fn to_value(&self) -> Value {
        match self {
            Self::Message { id, text, status } => message(id, text, status),
            Self::Other(value) => value.clone(),
        }
    }
}

impl Serialize for OutputItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Self::Message { id, text, status } = self else {
            let Self::Other(value) = self else {
                unreachable!("two kinds")
            };
            return value.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("type", "message")?;
        map.serialize_entry("id", id)?;
        map.serialize_entry("status", status)?;
        map.serialize_entry("role", "assistant")?;
        map.serialize_entry("content", &[TextPart { text }])?;
        map.end()
    }
}

/// An output text part, with no annotations.
struct TextPart<'a> {
    text: &'a str,
}

impl Serialize for TextPart<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("type", "output_text")?;
        map.serialize_entry("text", self.text)?;
        map.serialize_entry("annotations", &[] as &[Value])?;
        map.end()
    }
}

impl ResponseObject {
    /// `completed`, `incomplete`, `cancelled`, `failed`, `in_progress` or `queued`.
    pub fn status(&self) -> &'static str {
        self.status
    }

    /// The response's id.
    pub fn id(&self) -> &str {
        &self.shape.id
    }

    /// Its output items, as JSON.
    pub fn output(&self) -> Vec<Value> {
        self.output.iter().map(OutputItem::to_value).collect()
    }

    /// The same object with these output items (a stream's, as it streamed them).
    pub(crate) fn with_output(mut self, output: Vec<Value>) -> Self {
        self.output = output.into_iter().map(OutputItem::Other).collect();
        self
    }

    /// The error's code, for a failed response.
    pub fn error_code(&self) -> Option<&str> {
        self.extra.error.as_ref().map(|(code, _)| code.as_str())
    }

    /// This response failed with `code` and `message` (no seq: nothing of it is stored).
    pub(crate) fn failing(&self, code: &str, message: &str) -> Self {
        self.shape.failed(code, message, None)
    }

    /// As a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a response object serializes")
    }
}

impl Serialize for ResponseObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let shape = &self.shape;
        let mut map = serializer.serialize_map(Some(25))?;
        map.serialize_entry("id", &shape.id)?;
        map.serialize_entry("object", "response")?;
        map.serialize_entry("created_at", &shape.created_at)?;
        map.serialize_entry("status", self.status)?;
        map.serialize_entry("model", &shape.model)?;
        map.serialize_entry("output", &*self.output)?;
        map.serialize_entry("usage", &self.extra.usage.map(UsageObject))?;
        map.serialize_entry(
            "conversation",
            &IdObject {
                id: &shape.conversation,
            },
        )?;
        map.serialize_entry("previous_response_id", &shape.previous)?;
        map.serialize_entry("instructions", &shape.instructions)?;
        map.serialize_entry("metadata", &shape.metadata)?;
        let error = self
            .extra
            .error
            .as_ref()
            .map(|(code, message)| ErrorObject { code, message });
        map.serialize_entry("error", &error)?;
        let incomplete = self
            .extra
            .incomplete
            .as_deref()
            .map(|reason| Incomplete { reason });
        map.serialize_entry("incomplete_details", &incomplete)?;
        map.serialize_entry(
            "parallel_tool_calls",
            &shape.parallel_tool_calls.unwrap_or(true),
        )?;
        match &shape.tool_choice {
            Some(choice) => map.serialize_entry("tool_choice", choice)?,
            None => map.serialize_entry("tool_choice", "auto")?,
        }
        map.serialize_entry("tools", &shape.tools)?;
        map.serialize_entry("temperature", &shape.temperature)?;
        map.serialize_entry("top_p", &shape.top_p)?;
        map.serialize_entry("max_output_tokens", &shape.max_output_tokens)?;
        map.serialize_entry("store", &true)?;
        map.serialize_entry("background", &shape.background)?;
        match &shape.text {
            Some(text) => map.serialize_entry("text", text)?,
            None => map.serialize_entry("text", &TEXT_FORMAT)?,
        }
        map.serialize_entry("turnstile", &self.extra.seq.map(|seq| SeqObject { seq }))?;
        map.end()
    }
}

/// `{"format": {"type": "text"}}`, the default `text`.
const TEXT_FORMAT: TextDefault = TextDefault {
    format: TextKind { kind: "text" },
};

#[derive(Serialize)]
struct TextDefault {
    format: TextKind,
}

#[derive(Serialize)]
struct TextKind {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct IdObject<'a> {
    id: &'a str,
}

#[derive(Serialize)]
struct SeqObject {
    seq: u64,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct Incomplete<'a> {
    reason: &'a str,
}

struct UsageObject(Usage);

impl Serialize for UsageObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Usage {
            input_tokens,
            output_tokens,
        } = self.0;
        json!({
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens.saturating_add(output_tokens),
        })
        .serialize(serializer)
    }
}

/// A response's output items: its tool calls that show (MCP calls, and calls left to the
/// client), then its message — left out when it is empty and the turn left calls to the client.
pub(crate) fn output_of(
    calls: &[ToolCallRead],
    seq: u64,
    said: Said<'_>,
    status: &str,
) -> Vec<OutputItem> {
    let mut output: Vec<OutputItem> = calls
        .iter()
        .filter_map(output_item)
        .map(OutputItem::Other)
        .collect();
    let leaves_calls = calls
        .iter()
        .any(|c| c.server.is_none() && c.result.is_none());
    match said {
        Said::Refusal(refused) => {
            output.push(OutputItem::Other(refusal(&format!("msg_{seq}"), refused)));
        }
        Said::Text(text) if !(text.is_empty() && leaves_calls) => {
            output.push(OutputItem::Message {
                id: format!("msg_{seq}"),
                text: text.to_owned(),
                status: item_status(status),
            });
        }
        Said::Text(_) => {}
    }
    output
}

/// The status of a response whose turn ended with `kind`, and why it is incomplete.
pub(crate) fn status_of(kind: OutcomeKind, cancelled: bool) -> (&'static str, Option<String>) {
    match kind {
        OutcomeKind::Completed | OutcomeKind::Merged => ("completed", None),
        OutcomeKind::Interrupted(_) if cancelled => ("cancelled", None),
        OutcomeKind::Interrupted(InterruptReason::Requested) => ("cancelled", None),
        OutcomeKind::Interrupted(reason) => ("incomplete", Some(reason_name(reason))),
        OutcomeKind::Incomplete(reason) => ("incomplete", Some(incomplete_name(reason).into())),
        OutcomeKind::Refused => ("completed", None),
        OutcomeKind::Superseded => ("incomplete", Some("superseded".into())),
    }
}

/// Why a response is incomplete, in OpenAI's words (`incomplete_details.reason`).
pub(crate) fn incomplete_name(reason: IncompleteReason) -> &'static str {
    match reason {
        IncompleteReason::MaxTokens => "max_output_tokens",
        IncompleteReason::ContentFilter => "content_filter",
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
        let items = output_of(&calls, 7, Said::Text(""), "completed");
        let output: Vec<Value> = items.iter().map(OutputItem::to_value).collect();
        let shape = Arc::new(Shape::default());
        let object = shape
            .object("completed", items, Extra::default())
            .to_value();
        assert_eq!(object["output"], json!(output));
        assert_eq!(object["tool_choice"], "auto");
        assert_eq!(object["text"]["format"]["type"], "text");
        let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["mcp_call", "function_call"], "{output:#?}");
        assert_eq!(output[0]["output"], "r");
        assert_eq!(output[0]["arguments"], "{\"a\":1}");
        assert_eq!(output[1]["call_id"], "call_6");
        let said = output_of(&calls[..2], 7, Said::Text("hi"), "completed");
        let said = said.last().unwrap().to_value();
        assert_eq!(
            said,
            message("msg_7", "hi", "completed"),
            "typed as it reads"
        );
    }
}
