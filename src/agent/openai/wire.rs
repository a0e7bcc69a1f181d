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

/// The most bytes of refusal one response may send: a refusal is a sentence or two, and a
/// server that never stops sending one has its stream refused as malformed.
pub(super) const MAX_REFUSAL_BYTES: usize = 64 << 10;

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
    pub temperature: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tools: &'a [Value],
    /// The caller's choice on the turn's first round; `"none"` on the last round allowed, so
    /// that the model answers instead of calling again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

/// A number as it was given: the agent's settings are `f32` (written as `0.7`, not as the `f64`
/// nearest to that `f32`), a caller's are JSON numbers.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub(super) enum Number {
    Setting(f32),
    Given(f64),
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
    /// Which of the answers asked for this is part of: only the first (0) is asked for; none
    /// (or `null`) is taken as the first.
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub delta: Delta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    /// A piece of the model's refusal (instead of content).
    #[serde(default)]
    pub refusal: Option<String>,
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
    /// The first answer's `finish_reason`, as the server gave it (`stop`, `length`…).
    pub finish_reason: Option<String>,
    /// The model's refusal, when it refused instead of answering.
    pub refusal: String,
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
        // Only the first answer counts: the request never asks for more than one, and a server
        // that sends others anyway (another `index`) must not have them merged into the reply.
        if let Some(choice) = chunk
            .choices
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
        {
            if let Some(text) = choice.delta.content {
                added.push_str(&text);
            }
            if let Some(refusal) = choice.delta.refusal {
                if self.refusal.len().saturating_add(refusal.len()) > MAX_REFUSAL_BYTES {
                    return Err(format!(
                        "a refusal of more than {MAX_REFUSAL_BYTES} bytes in one response"
                    ));
                }
                self.refusal.push_str(&refusal);
            }
            for part in choice.delta.tool_calls {
                self.add_call_part(part)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.finished = true;
                // Bounded: a reason is a word; a server's longer one is kept as its first 64 bytes.
                let end = crate::agent::floor_char_boundary(&reason, 64);
                self.finish_reason = Some(reason[..end].to_owned());
            }
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
/// events, then the turn's input(s), one user message each (an empty one, which only carries
/// tool results that came before it, is left out).
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
            // An empty message carries a turn that only answers tool calls (their results
            // come before it): nothing to say.
            EventKind::UserInput { text, .. } if !text.is_empty() => {
                out.push(Message::text("user", text.clone()))
            }
            // A reply while calls of it still wait for their results (a turn that ended with
            // calls left to its caller): said with those calls, before the results come.
            EventKind::AgentOutput { text, .. } if !text.is_empty() && !sent.is_empty() => {
                let calling = out
                    .iter_mut()
                    .rev()
                    .find(|m| m.role == "assistant" && !m.tool_calls.is_empty());
                if let Some(calling) = calling {
                    match &mut calling.content {
                        Some(said) => {
                            said.push_str("\n\n");
                            said.push_str(text);
                        }
                        none => *none = Some(text.clone()),
                    }
                }
            }
            EventKind::AgentOutput { text, .. } if !text.is_empty() => {
                out.push(Message::text("assistant", text.clone()))
            }
            EventKind::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                // A result recorded later in the window proves the pair is complete; a call
                // whose id was sent already (a client that brought it again) is that call.
                let later = answered.iter().any(|id| id == call_id);
                if !later || sent.contains_key(call_id.as_str()) {
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
            .filter(|input| !input.is_empty())
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
mod tests;
