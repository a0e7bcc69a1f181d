//! A `POST /v1/responses` body, read field by field: each field is acted on, or the request is
//! refused naming it — never accepted and ignored. A field sent as `null` is absent.

use serde_json::{json, Map, Value};

use super::items::{InputItem, Role, Said};
use super::{check_metadata, check_model, Metadata, ResponsesError};
use crate::call::Entry;
use crate::config::MAX_PRECEDING_ENTRIES;

/// Most tools a request may declare (OpenAI's bound).
pub const MAX_TOOLS: usize = 128;

/// Most input items one response takes: a client that keeps its own history (LangChain, the
/// Agents SDK's sessions) sends it whole with every request, so this is the bound on entries a
/// message may bring, and the message.
pub const MAX_INPUT_ITEMS: usize = MAX_PRECEDING_ENTRIES + 1;

/// A response request, as this server acts on it.
#[derive(Debug, Clone, Default)]
pub struct ResponseRequest {
    /// The model named (recorded in the response; the session's agent answers).
    pub model: Option<String>,
    /// The turn's message: the input's last item when it is a user message, else empty (the
    /// input only answers tool calls, or ends with an assistant message to continue).
    pub message: String,
    /// Every input item before the message, as log entries, in order.
    pub brought: Vec<Entry>,
    /// The ids of the calls the `function_call_output` items among `brought` answer.
    pub outputs: Vec<String>,
    /// The ids of the `function_call` items among `brought`.
    pub calls: Vec<String>,
    /// `instructions` and the input's system and developer messages, joined.
    pub instructions: Option<String>,
    /// The conversation named (by id or `{"id"}`).
    pub conversation: Option<String>,
    /// The response to continue after.
    pub previous_response_id: Option<String>,
    /// Echoed in the response.
    pub metadata: Metadata,
    /// Answer as typed server-sent events.
    pub stream: bool,
    /// Answer at once and run detached; `retrieve` polls it.
    pub background: bool,
    /// The function tools declared, as given (echoed) and in chat-completions form (for the
    /// agent).
    pub tools: Vec<Value>,
    /// The tools in chat-completions form.
    pub agent_tools: Vec<Value>,
    /// `tool_choice` as given, and in chat-completions form.
    pub tool_choice: Option<(Value, Value)>,
    /// `parallel_tool_calls`.
    pub parallel_tool_calls: Option<bool>,
    /// `text` as given, and its format in chat-completions form (`response_format`).
    pub text: Option<(Value, Value)>,
    /// Sampling and length.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `max_output_tokens`.
    pub max_output_tokens: Option<u64>,
    /// The body, digested: a retry (same `Idempotency-Key`) with another body is refused.
    pub fingerprint: String,
}

/// A request body, digested: 32 hex digits of the SHA-256 of its JSON as it came.
pub(crate) fn fingerprint(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    serde_json::to_writer(HashWriter(&mut hasher), body).expect("a JSON value serializes");
    let mut hex = String::with_capacity(32);
    super::ids::push_hex(&mut hex, &hasher.finalize()[..16]);
    hex
}

/// Feeds what is written to a hasher.
struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every field this server reads; the others are refused unless `null`.
const FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "conversation",
    "previous_response_id",
    "metadata",
    "stream",
    "stream_options",
    "store",
    "background",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "temperature",
    "top_p",
    "max_output_tokens",
    "include",
    "truncation",
];

fn invalid(param: &str, message: impl Into<String>) -> ResponsesError {
    ResponsesError::invalid(param, message)
}

fn string(body: &Map<String, Value>, name: &str) -> Result<Option<String>, ResponsesError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid(name, format!("{name} must be a string"))),
    }
}

fn boolean(body: &Map<String, Value>, name: &str) -> Result<Option<bool>, ResponsesError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid(name, format!("{name} must be true or false"))),
    }
}

fn number(body: &Map<String, Value>, name: &str) -> Result<Option<f64>, ResponsesError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_f64()
            .map(Some)
            .ok_or_else(|| invalid(name, format!("{name} must be a number"))),
    }
}

impl ResponseRequest {
    /// Reads a request body; refuses it naming the first field it cannot act on.
    pub fn from_json(body: Value) -> Result<Self, ResponsesError> {
        let digest = fingerprint(&body);
        let Value::Object(body) = body else {
            return Err(invalid("body", "the body must be a JSON object"));
        };
        if let Some((name, _)) = body
            .iter()
            .find(|(name, value)| !FIELDS.contains(&name.as_str()) && !value.is_null())
        {
            return Err(invalid(
                name,
                format!(
                    "{name} is not supported by this server; leave it out (the fields it acts \
                     on are: {})",
                    FIELDS.join(", ")
                ),
            ));
        }
        let mut request = Self {
            model: string(&body, "model")?,
            previous_response_id: string(&body, "previous_response_id")?,
            stream: boolean(&body, "stream")?.unwrap_or(false),
            background: boolean(&body, "background")?.unwrap_or(false),
            parallel_tool_calls: boolean(&body, "parallel_tool_calls")?,
            temperature: number(&body, "temperature")?,
            top_p: number(&body, "top_p")?,
            fingerprint: digest,
            ..Self::default()
        };
        if let Some(model) = &request.model {
            check_model(model)?;
        }
        check_sampling(request.temperature, request.top_p)?;
        request.read_settings(&body)?;
        request.read_input(&body)?;
        request.read_tools(&body)?;
        request.read_text(&body)?;
        Ok(request)
    }

    /// The fields that choose how to answer rather than what.
    fn read_settings(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        if boolean(body, "store")? == Some(false) {
            return Err(invalid(
                "store",
                "every response is a stored turn: store must be true",
            ));
        }
        if let Some(options) = body.get("stream_options").filter(|v| !v.is_null()) {
            let obfuscated = options.get("include_obfuscation").and_then(Value::as_bool);
            if !options.is_object() || obfuscated == Some(true) {
                return Err(invalid(
                    "stream_options",
                    "stream_options.include_obfuscation is not supported: events are never \
                     padded here",
                ));
            }
        }
        match body.get("include") {
            None | Some(Value::Null) => {}
            Some(Value::Array(asked)) if asked.is_empty() => {}
            Some(asked) => {
                return Err(invalid(
                    "include",
                    format!("include {asked} is not supported: items carry all they have"),
                ))
            }
        }
        match string(body, "truncation")?.as_deref() {
            None | Some("auto") => {}
            Some(other) => {
                return Err(invalid(
                    "truncation",
                    format!(
                        "truncation {other:?} is not supported: the session's context window \
                         always applies (\"auto\")"
                    ),
                ))
            }
        }
        if let Some(value) = body.get("max_output_tokens").filter(|v| !v.is_null()) {
            let most = value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                invalid(
                    "max_output_tokens",
                    "max_output_tokens must be a positive integer",
                )
            })?;
            self.max_output_tokens = Some(most);
        }
        self.instructions = string(body, "instructions")?;
        self.conversation = match body.get("conversation") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id.clone()),
            Some(Value::Object(named)) => match named.get("id") {
                Some(Value::String(id)) => Some(id.clone()),
                _ => return Err(invalid("conversation", "conversation is an id or {\"id\"}")),
            },
            Some(_) => return Err(invalid("conversation", "conversation is an id or {\"id\"}")),
        };
        self.metadata = match body.get("metadata") {
            None | Some(Value::Null) => Metadata::new(),
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|_| invalid("metadata", "metadata maps string keys to string values"))?,
        };
        check_metadata(&self.metadata)?;
        Ok(())
    }

    /// `input`: a string, or items whose last user message is the turn's message.
    fn read_input(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        let items: Vec<InputItem> = match body.get("input") {
            None | Some(Value::Null) => return Err(invalid("input", "input is required")),
            Some(Value::String(text)) => {
                self.message = text.clone();
                return Ok(());
            }
            Some(items @ Value::Array(_)) => serde_json::from_value(items.clone())
                .map_err(|e| invalid("input", format!("input items are objects: {e}")))?,
            Some(_) => return Err(invalid("input", "input is a string or a list of items")),
        };
        if items.is_empty() || items.len() > MAX_INPUT_ITEMS {
            return Err(invalid(
                "input",
                format!("input holds 1 to {MAX_INPUT_ITEMS} items"),
            ));
        }
        let mut said = Vec::with_capacity(items.len());
        for (at, item) in items.iter().enumerate() {
            said.push(
                item.said()
                    .map_err(|e| invalid("input", format!("input[{at}]: {e}")))?,
            );
        }
        let mut told: Vec<String> = self.instructions.take().into_iter().collect();
        said.retain(|s| match s {
            Said::Message {
                role: Role::Instructions,
                text,
            } => {
                told.push(text.clone());
                false
            }
            _ => true,
        });
        self.instructions = (!told.is_empty()).then(|| told.join("\n\n"));
        if let Some(Said::Message {
            role: Role::User, ..
        }) = said.last()
        {
            if let Some(Said::Message { text, .. }) = said.pop() {
                self.message = text;
            }
        }
        for (at, s) in said.into_iter().enumerate() {
            match &s {
                Said::Output { call_id, .. } => self.outputs.push(call_id.clone()),
                Said::Call { call_id, .. } if self.outputs.contains(call_id) => {
                    return Err(invalid(
                        "input",
                        format!(
                            "input[{at}]: the function call {call_id:?} comes after its output"
                        ),
                    ));
                }
                Said::Call { call_id, .. } => self.calls.push(call_id.clone()),
                _ => {}
            }
            self.brought.extend(s.entries());
        }
        if self.brought.len() > MAX_PRECEDING_ENTRIES {
            return Err(invalid(
                "input",
                format!(
                    "input brings {} entries before its message (an mcp_call item is two); at \
                     most {MAX_PRECEDING_ENTRIES}",
                    self.brought.len()
                ),
            ));
        }
        if self.message.is_empty() && self.outputs.is_empty() && self.brought.is_empty() {
            return Err(invalid(
                "input",
                "input holds no user message and no function call output",
            ));
        }
        Ok(())
    }

    /// `tools` and `tool_choice`: function tools, which the client runs.
    fn read_tools(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        match body.get("tools") {
            None | Some(Value::Null) => {}
            Some(Value::Array(tools)) => {
                if tools.len() > MAX_TOOLS {
                    return Err(invalid("tools", format!("at most {MAX_TOOLS} tools")));
                }
                for (at, tool) in tools.iter().enumerate() {
                    self.agent_tools.push(function_tool(tool, at)?);
                }
                self.tools = tools.clone();
            }
            Some(_) => return Err(invalid("tools", "tools is a list")),
        }
        let declared = |name: &str| {
            self.agent_tools
                .iter()
                .any(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))
        };
        let choice = match body.get("tool_choice") {
            None | Some(Value::Null) => return Ok(()),
            Some(choice) => choice,
        };
        let agent_form = match choice {
            Value::String(mode) if mode == "required" && self.agent_tools.is_empty() => {
                return Err(invalid(
                    "tool_choice",
                    "tool_choice \"required\" needs tools to choose from",
                ))
            }
            Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => {
                choice.clone()
            }
            Value::Object(named) if named.get("type") == Some(&json!("function")) => {
                let name = named
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !declared(name) {
                    return Err(invalid(
                        "tool_choice",
                        format!("tool_choice names {name:?}, which is not among tools"),
                    ));
                }
                json!({"type": "function", "function": {"name": name}})
            }
            other => {
                return Err(invalid(
                    "tool_choice",
                    format!(
                        "tool_choice {other} is not supported; \"auto\", \"none\", \
                         \"required\" or {{\"type\": \"function\", \"name\"}} are"
                    ),
                ))
            }
        };
        self.tool_choice = Some((choice.clone(), agent_form));
        Ok(())
    }

    /// `text`: the answer's format (`text`, `json_schema`, `json_object`).
    fn read_text(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        let text = match body.get("text") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Object(text)) => text,
            Some(_) => return Err(invalid("text", "text is an object")),
        };
        if let Some((name, _)) = text
            .iter()
            .find(|(name, value)| name.as_str() != "format" && !value.is_null())
        {
            return Err(invalid(
                "text",
                format!("text.{name} is not supported; text.format is"),
            ));
        }
        let format = match text.get("format") {
            None | Some(Value::Null) => return Ok(()),
            Some(format) => format,
        };
        let kind = format
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let agent_form = match kind {
            "text" => return Ok(()),
            "json_object" => json!({"type": "json_object"}),
            "json_schema" => {
                let (Some(name), Some(schema)) = (
                    format.get("name").and_then(Value::as_str),
                    format.get("schema").filter(|s| s.is_object()),
                ) else {
                    return Err(invalid(
                        "text",
                        "a json_schema format needs its name and schema",
                    ));
                };
                let mut spec = json!({"name": name, "schema": schema});
                for optional in ["strict", "description"] {
                    if let Some(value) = format.get(optional).filter(|v| !v.is_null()) {
                        spec[optional] = value.clone();
                    }
                }
                json!({"type": "json_schema", "json_schema": spec})
            }
            other => {
                return Err(invalid(
                    "text",
                    format!("text.format of type {other:?} is not supported"),
                ))
            }
        };
        self.text = Some((Value::Object(text.clone()), agent_form));
        Ok(())
    }
}

/// Sampling within OpenAI's ranges: `temperature` 0 to 2, `top_p` 0 to 1.
pub(crate) fn check_sampling(
    temperature: Option<f64>,
    top_p: Option<f64>,
) -> Result<(), ResponsesError> {
    if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return Err(invalid("temperature", "temperature is between 0 and 2"));
    }
    if top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return Err(invalid("top_p", "top_p is between 0 and 1"));
    }
    Ok(())
}

/// A function tool, in chat-completions form; other kinds of tools are refused.
fn function_tool(tool: &Value, at: usize) -> Result<Value, ResponsesError> {
    let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind != "function" {
        return Err(invalid(
            "tools",
            format!(
                "tools[{at}] is of type {kind:?}; only function tools are supported here (the \
                 server's own tools come from its agent and MCP servers)"
            ),
        ));
    }
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("tools", format!("tools[{at}] needs its name")))?;
    let mut function = json!({"name": name});
    for optional in ["description", "parameters", "strict"] {
        if let Some(value) = tool.get(optional).filter(|v| !v.is_null()) {
            function[optional] = value.clone();
        }
    }
    Ok(json!({"type": "function", "function": function}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: Value) -> Result<ResponseRequest, ResponsesError> {
        ResponseRequest::from_json(body)
    }

    fn param(body: Value) -> String {
        match read(body.clone()) {
            Err(ResponsesError::Invalid { param, .. }) => param,
            other => panic!("{body} was not refused: {other:?}"),
        }
    }

    #[test]
    fn a_history_sent_whole_becomes_entries_before_the_last_user_message() {
        let request = read(json!({
            "model": "m", "include": [], "instructions": "be brief",
            "input": [
                {"role": "developer", "content": "in English"},
                {"role": "user", "content": "hi"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "hello", "annotations": []}]},
                {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "5"},
                {"role": "user", "content": "and now?"},
            ],
        }))
        .unwrap();
        assert_eq!(request.message, "and now?");
        assert_eq!(
            request.instructions.as_deref(),
            Some("be brief\n\nin English")
        );
        assert_eq!(request.brought.len(), 4);
        assert_eq!(request.brought[1], Entry::Agent("hello".into()));
        assert_eq!(
            (request.calls.clone(), request.outputs.clone()),
            (vec!["c1".into()], vec!["c1".into()])
        );
    }

    #[test]
    fn an_input_of_tool_outputs_only_has_an_empty_message() {
        let request = read(json!({"input": [
            {"type": "function_call_output", "call_id": "c9", "output": [
                {"type": "input_text", "text": "42"}]},
        ]}))
        .unwrap();
        assert_eq!(request.message, "");
        assert_eq!(request.outputs, vec!["c9".to_owned()]);
    }

    #[test]
    fn tools_choices_and_formats_are_read_in_the_agents_form() {
        let request = read(json!({
            "input": "hi",
            "tools": [{"type": "function", "name": "add", "description": "Adds.",
                       "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "add"},
            "parallel_tool_calls": false,
            "text": {"format": {"type": "json_schema", "name": "P", "strict": true,
                                "schema": {"type": "object"}}},
            "temperature": 0.2, "top_p": null, "max_output_tokens": 50,
        }))
        .unwrap();
        assert_eq!(request.agent_tools[0]["function"]["name"], "add");
        assert_eq!(request.agent_tools[0]["function"]["strict"], true);
        let (_, choice) = request.tool_choice.clone().unwrap();
        assert_eq!(
            choice,
            json!({"type": "function", "function": {"name": "add"}})
        );
        let (_, format) = request.text.clone().unwrap();
        assert_eq!(format["json_schema"]["name"], "P");
        assert_eq!(format["type"], "json_schema");
        assert_eq!((request.temperature, request.top_p), (Some(0.2), None));
        assert_eq!(request.max_output_tokens, Some(50));
        assert_eq!(request.parallel_tool_calls, Some(false));
    }

    /// Nothing is accepted and ignored: each field the server does not act on is refused by
    /// name, unless it is null.
    #[test]
    fn what_is_not_acted_on_is_refused_by_name() {
        assert_eq!(
            param(json!({"input": "hi", "reasoning": {"effort": "low"}})),
            "reasoning"
        );
        assert_eq!(param(json!({"input": "hi", "user": "u1"})), "user");
        assert_eq!(param(json!({"input": "hi", "store": false})), "store");
        assert_eq!(
            param(json!({"input": "hi", "include": ["reasoning.encrypted_content"]})),
            "include"
        );
        assert_eq!(
            param(json!({"input": "hi", "truncation": "disabled"})),
            "truncation"
        );
        assert_eq!(
            param(json!({"input": "hi", "tools": [{"type": "web_search"}]})),
            "tools"
        );
        assert_eq!(
            param(json!({"input": "hi", "tool_choice": {"type": "function", "name": "x"}})),
            "tool_choice"
        );
        assert_eq!(
            param(json!({"input": "hi", "text": {"verbosity": "low"}})),
            "text"
        );
        assert_eq!(
            param(json!({"input": "hi", "text": {"format": {"type": "grammar"}}})),
            "text"
        );
        assert_eq!(
            param(json!({"input": "hi", "stream_options": {"include_obfuscation": true}})),
            "stream_options"
        );
        assert_eq!(param(json!({"input": [{"type": "reasoning"}]})), "input");
        assert_eq!(param(json!({"input": []})), "input");
        assert_eq!(
            param(json!({"input": [{"role": "system", "content": "x"}]})),
            "input"
        );
        assert_eq!(
            param(json!({"input": "hi", "max_output_tokens": 0})),
            "max_output_tokens"
        );
        assert!(read(json!({"input": "hi", "user": null, "reasoning": null})).is_ok());
    }
}
