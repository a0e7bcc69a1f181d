//! The part of the chat-completions API this agent speaks: the request, the streamed chunks, and
//! the conversation rebuilt from a session's events. Pure: no I/O.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::in_failed_turns;
use crate::state::{Event, EventKind, ToolStatus, Usage};

/// Tool calls one model response may ask for at most. Models ask for a handful at once
/// (parallel tool calls); sixty-four is far past any real answer, and bounds what one response
/// can make the agent run and record. A call's `index` must be below it.
pub(super) const MAX_TOOL_CALLS_PER_ROUND: usize = 64;

/// Bytes of tool-call names, ids and arguments one response may stream at most, all calls
/// together. Arguments are a JSON object of a few fields, at most a document handed to a tool;
/// a megabyte holds that many times over, and bounds what a response that never stops adding
/// to its arguments costs.
pub(super) const MAX_TOOL_CALL_BYTES: usize = 1 << 20;

/// One message of a chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The text; an assistant message that only calls tools has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tools an assistant message calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub(super) fn text(role: &'static str, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    pub(super) fn tool_result(call_id: impl Into<String>, content: String) -> Self {
        Self {
            role: "tool",
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }

    pub(super) fn tool_calls(content: Option<String>, calls: Vec<WireToolCall>) -> Self {
        Self {
            role: "assistant",
            content,
            tool_calls: calls,
            tool_call_id: None,
        }
    }
}

/// A tool call as an assistant message carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct WireToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunction,
}

/// The function a [`WireToolCall`] names, with its arguments as a JSON string.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct WireFunction {
    pub name: String,
    pub arguments: String,
}

impl WireToolCall {
    pub(super) fn new(id: impl Into<String>, name: impl Into<String>, arguments: String) -> Self {
        Self {
            id: id.into(),
            kind: "function",
            function: WireFunction {
                name: name.into(),
                arguments,
            },
        }
    }
}

/// A streamed chat-completions request.
#[derive(Debug, Serialize)]
pub(super) struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    pub stream: bool,
    pub stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools: &'a [Value],
    /// `"none"` on the last round allowed, so that the model answers instead of calling again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
}

/// Asks for a last chunk carrying the token usage.
#[derive(Debug, Serialize)]
pub(super) struct StreamOptions {
    pub include_usage: bool,
}

/// One streamed chunk (`chat.completion.chunk`), or an error object some servers send instead.
#[derive(Debug, Deserialize)]
pub(super) struct Chunk {
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub delta: Delta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A fragment of a tool call: the first names it, the next ones add to its arguments.
#[derive(Debug, Deserialize)]
pub(super) struct ToolCallDelta {
    #[serde(default)]
    pub index: usize,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts as the API reports them.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
        }
    }
}

/// A tool call the model asked for, once its fragments are joined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct AskedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What one streamed response said: its text, the tool calls it asked for, its usage.
#[derive(Debug, Default)]
pub(super) struct Round {
    pub text: String,
    pub calls: Vec<AskedCall>,
    pub usage: Option<Usage>,
    pub finished: bool,
    /// Bytes of tool-call names, ids and arguments received (see [`MAX_TOOL_CALL_BYTES`]).
    call_bytes: usize,
}

impl Round {
    /// Folds one chunk in; returns the text it added (to stream at once), or why the chunk
    /// breaks a bound (the stream is then refused as malformed).
    pub(super) fn apply(&mut self, chunk: Chunk) -> Result<String, String> {
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        let mut added = String::new();
        // Only the first choice counts: the request never asks for more than one.
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(text) = choice.delta.content {
                added.push_str(&text);
            }
            for part in choice.delta.tool_calls {
                self.add_call_part(part)?;
            }
            self.finished |= choice.finish_reason.is_some();
        }
        self.text.push_str(&added);
        Ok(added)
    }

    /// Adds a fragment of a tool call, within the bounds on calls and their bytes.
    fn add_call_part(&mut self, part: ToolCallDelta) -> Result<(), String> {
        if part.index >= MAX_TOOL_CALLS_PER_ROUND {
            return Err(format!(
                "a tool call with index {}, past the limit of {MAX_TOOL_CALLS_PER_ROUND} calls \
                 per response",
                part.index
            ));
        }
        let (name, arguments) = part
            .function
            .map_or((None, None), |f| (f.name, f.arguments));
        let bytes = [&part.id, &name, &arguments]
            .into_iter()
            .flatten()
            .map(String::len)
            .sum::<usize>();
        self.call_bytes = self.call_bytes.saturating_add(bytes);
        if self.call_bytes > MAX_TOOL_CALL_BYTES {
            return Err(format!(
                "tool calls of more than {MAX_TOOL_CALL_BYTES} bytes (names, ids and arguments) \
                 in one response"
            ));
        }
        if self.calls.len() <= part.index {
            self.calls.resize_with(part.index + 1, AskedCall::default);
        }
        let call = &mut self.calls[part.index];
        if let Some(id) = part.id {
            call.id = id;
        }
        call.name.push_str(name.as_deref().unwrap_or_default());
        call.arguments
            .push_str(arguments.as_deref().unwrap_or_default());
        Ok(())
    }
}

/// The conversation for a turn: the system prompt, the `<memory-context>` block, the window's
/// events, then the turn's input(s), one user message each.
///
/// Tool calls become an assistant message with `tool_calls` followed by one `tool` message per
/// result. Ids are renamed to be unique in the request: history calls are `call_<seq>` (a
/// session numbers calls per turn), the calls of the turn being answered `call_t<n>` (see
/// [`current_call_id`]), never the model's own ids. A call or result whose partner slid out of
/// the window is left out (chat APIs refuse either alone); a failed call's result reads
/// `error: …`, as it did when the model first saw it. Failed turns (a `turn_failed` event and
/// the inputs it answers) are left out unless `failed_turns` says to keep their inputs.
pub(super) fn conversation(
    system: Option<String>,
    memory: Option<String>,
    history: &[Event],
    inputs: &[String],
    failed_turns: bool,
) -> Vec<Message> {
    let mut out: Vec<Message> = system
        .into_iter()
        .chain(memory)
        .map(|text| Message::text("system", text))
        .collect();
    let answered: Vec<&str> = history
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    // Session call id → id in this request, for calls whose assistant message was sent.
    let mut sent: HashMap<&str, String> = HashMap::new();
    let failed = in_failed_turns(history);
    for (event, failed) in history.iter().zip(failed) {
        let is_input = matches!(event.kind, EventKind::UserInput { .. });
        if failed && !(failed_turns && is_input) {
            continue;
        }
        match &event.kind {
            EventKind::UserInput { text, .. } => out.push(Message::text("user", text.clone())),
            EventKind::AgentOutput { text, .. } if !text.is_empty() => {
                out.push(Message::text("assistant", text.clone()))
            }
            EventKind::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                // A result recorded later in the window proves the pair is complete.
                let later = answered.iter().any(|id| id == call_id);
                if !later {
                    continue;
                }
                let wire_id = format!("call_{}", event.seq);
                let call = WireToolCall::new(wire_id.clone(), name.clone(), arguments.to_string());
                sent.insert(call_id.as_str(), wire_id);
                match out.last_mut() {
                    Some(last) if last.role == "assistant" && !last.tool_calls.is_empty() => {
                        last.tool_calls.push(call)
                    }
                    _ => out.push(Message::tool_calls(None, vec![call])),
                }
            }
            EventKind::ToolResult {
                call_id,
                result,
                status,
                ..
            } => {
                if let Some(wire_id) = sent.remove(call_id.as_str()) {
                    let content = match status {
                        ToolStatus::Cancelled => {
                            "cancelled: the turn was interrupted before the tool finished".into()
                        }
                        ToolStatus::Error => error_text(result),
                        ToolStatus::Ok => tool_text(result),
                    };
                    out.push(Message::tool_result(wire_id, content));
                }
            }
            _ => {}
        }
    }
    out.extend(
        inputs
            .iter()
            .map(|input| Message::text("user", input.clone())),
    );
    out
}

/// A tool's result as message text: strings as they are, other values as JSON.
pub(super) fn tool_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A failed tool call's result as message text: marked, so that the model tells it from a
/// result.
pub(super) fn error_text(result: &Value) -> String {
    format!("error: {}", tool_text(result))
}

/// The id of the `n`th tool call (from 1) of the turn being answered, in its requests: apart
/// from every history call's `call_<seq>`, whatever ids the model gave.
pub(super) fn current_call_id(n: usize) -> String {
    format!("call_t{n}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, InputDisposition, OutputStatus, ToolStatus};
    use serde_json::json;

    fn event(seq: u64, kind: EventKind) -> Event {
        Event::new(seq, Author::Agent, 0, kind)
    }

    fn input(seq: u64, text: &str) -> Event {
        event(
            seq,
            EventKind::UserInput {
                text: text.into(),
                disposition: InputDisposition::Answered,
            },
        )
    }

    fn call(seq: u64, id: &str) -> Event {
        event(
            seq,
            EventKind::ToolCall {
                call_id: id.into(),
                name: "clock".into(),
                arguments: Box::new(json!({"tz": "UTC"})),
                server: None,
            },
        )
    }

    fn failed(seq: u64) -> Event {
        event(
            seq,
            EventKind::TurnFailed {
                code: "model_timeout".into(),
                reason: "silent".into(),
                duration_ms: 0,
            },
        )
    }

    fn result(seq: u64, id: &str, status: ToolStatus) -> Event {
        event(
            seq,
            EventKind::ToolResult {
                call_id: id.into(),
                result: Box::new(json!("12:00")),
                status,
                duration_ms: Some(1),
            },
        )
    }

    fn output(seq: u64, text: &str) -> Event {
        event(
            seq,
            EventKind::AgentOutput {
                text: text.into(),
                status: OutputStatus::Final,
                duration_ms: 0,
                usage: None,
            },
        )
    }

    fn roles(messages: &[Message]) -> Vec<&'static str> {
        messages.iter().map(|m| m.role).collect()
    }

    #[test]
    fn system_then_memory_then_history_then_every_merged_input() {
        let history = [input(1, "hi"), output(2, "hello")];
        let inputs = ["a".to_owned(), "b".to_owned()];
        let messages = conversation(
            Some("sys".into()),
            Some("mem".into()),
            &history,
            &inputs,
            false,
        );
        assert_eq!(
            roles(&messages),
            ["system", "system", "user", "assistant", "user", "user"]
        );
        assert_eq!(messages[0].content.as_deref(), Some("sys"));
        assert_eq!(messages[1].content.as_deref(), Some("mem"));
        assert_eq!(messages[5].content.as_deref(), Some("b"));
    }

    #[test]
    fn tool_calls_pair_with_their_results_under_ids_unique_in_the_request() {
        // Two turns both numbered their first call `call-1`.
        let history = [
            input(1, "time?"),
            call(2, "call-1"),
            call(3, "call-2"),
            result(4, "call-2", ToolStatus::Ok),
            result(5, "call-1", ToolStatus::Cancelled),
            output(6, "noon"),
            input(7, "again?"),
            call(8, "call-1"),
            result(9, "call-1", ToolStatus::Ok),
            output(10, "still noon"),
        ];
        let messages = conversation(None, None, &history, &[], false);
        assert_eq!(
            roles(&messages),
            [
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool",
                "assistant"
            ]
        );
        let ids: Vec<&str> = messages[1]
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["call_2", "call_3"]);
        assert_eq!(messages[2].tool_call_id.as_deref(), Some("call_3"));
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_2"));
        assert!(messages[3]
            .content
            .as_deref()
            .unwrap()
            .starts_with("cancelled"));
        assert_eq!(messages[7].tool_call_id.as_deref(), Some("call_8"));
        assert_eq!(
            messages[1].tool_calls[0].function.arguments,
            r#"{"tz":"UTC"}"#
        );
    }

    #[test]
    fn a_call_or_result_without_its_partner_in_the_window_is_left_out() {
        let history = [
            result(1, "call-1", ToolStatus::Ok),
            call(2, "call-2"),
            input(3, "x"),
        ];
        let messages = conversation(None, None, &history, &[], false);
        assert_eq!(roles(&messages), ["user"]);
    }

    #[test]
    fn tool_call_fragments_are_joined_by_index() {
        let mut round = Round::default();
        let chunks = [
            json!({"choices":[{"delta":{"content":"Let me "}}]}),
            json!({"choices":[{"delta":{"tool_calls":[
                {"index":0,"id":"a","function":{"name":"clock","arguments":"{\"tz\""}},
                {"index":1,"id":"b","function":{"name":"calc","arguments":""}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[
                {"index":0,"function":{"arguments":":\"UTC\"}"}}]}, "finish_reason":"tool_calls"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7}}),
        ];
        let added: Vec<String> = chunks
            .into_iter()
            .map(|c| round.apply(serde_json::from_value(c).unwrap()).unwrap())
            .collect();
        assert_eq!(added[0], "Let me ");
        assert_eq!(round.text, "Let me ");
        assert_eq!(round.calls.len(), 2);
        assert_eq!(round.calls[0].arguments, r#"{"tz":"UTC"}"#);
        assert_eq!(round.calls[1].name, "calc");
        assert!(round.finished);
        assert_eq!(round.usage.map(|u| u.input_tokens), Some(11));
    }

    #[test]
    fn a_failed_result_keeps_its_error_marking() {
        let history = [
            input(1, "time?"),
            call(2, "call-1"),
            result(3, "call-1", ToolStatus::Error),
            output(4, "sorry"),
        ];
        let messages = conversation(None, None, &history, &[], false);
        assert_eq!(messages[2].content.as_deref(), Some("error: 12:00"));
    }

    #[test]
    fn failed_turns_are_left_out_unless_asked_for() {
        let history = [
            input(1, "hi"),
            output(2, "hello"),
            input(3, "lost"),
            failed(4),
            input(5, "again"),
            output(6, "there"),
        ];
        let texts = |messages: Vec<Message>| -> Vec<String> {
            messages.into_iter().filter_map(|m| m.content).collect()
        };
        let left_out = conversation(None, None, &history, &[], false);
        assert_eq!(texts(left_out), ["hi", "hello", "again", "there"]);
        let kept = conversation(None, None, &history, &[], true);
        assert_eq!(texts(kept), ["hi", "hello", "lost", "again", "there"]);
    }

    #[test]
    fn a_huge_tool_call_index_is_refused_before_anything_is_allocated() {
        for index in [MAX_TOOL_CALLS_PER_ROUND as u64, 999_999_999_999] {
            let mut round = Round::default();
            let chunk = json!({"choices":[{"delta":{"tool_calls":[
                {"index": index, "id": "x", "function": {"name": "f", "arguments": "{}"}}]}}]});
            let err = round
                .apply(serde_json::from_value(chunk).unwrap())
                .unwrap_err();
            assert!(err.contains("past the limit of 64 calls"), "{err}");
            assert!(round.calls.is_empty());
        }
        let mut round = Round::default();
        let last = json!({"choices":[{"delta":{"tool_calls":[
            {"index": MAX_TOOL_CALLS_PER_ROUND - 1, "function": {"name": "f"}}]}}]});
        round.apply(serde_json::from_value(last).unwrap()).unwrap();
        assert_eq!(round.calls.len(), MAX_TOOL_CALLS_PER_ROUND);
    }

    #[test]
    fn tool_call_arguments_past_their_bound_are_refused() {
        let mut round = Round::default();
        let piece = "x".repeat(MAX_TOOL_CALL_BYTES / 4 + 1);
        let chunk = || {
            json!({"choices":[{"delta":{"tool_calls":[
                {"index": 0, "function": {"arguments": piece}}]}}]})
        };
        for _ in 0..3 {
            round
                .apply(serde_json::from_value(chunk()).unwrap())
                .unwrap();
        }
        let err = round
            .apply(serde_json::from_value(chunk()).unwrap())
            .unwrap_err();
        assert!(err.contains("tool calls of more than"), "{err}");
    }

    #[test]
    fn the_request_asks_for_usage_and_leaves_out_what_is_unset() {
        let messages = [Message::text("user", "hi")];
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: None,
            max_tokens: Some(5),
            tools: &[],
            tool_choice: None,
        };
        let value = serde_json::to_value(&request).unwrap();
        assert_eq!(value["stream_options"]["include_usage"], json!(true));
        assert_eq!(value["max_tokens"], json!(5));
        assert!(value.get("temperature").is_none() && value.get("tools").is_none());
        assert_eq!(value["messages"][0], json!({"role":"user","content":"hi"}));
    }
}
