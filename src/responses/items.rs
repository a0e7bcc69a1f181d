//! Items: what a client sends (input items, and the messages it adds to a conversation), and a
//! conversation's log as OpenAI shows it.
//!
//! In a listing, a user input is a `message` of role `user`, an agent's output one of role
//! `assistant`, a tool call a `function_call` and its result a `function_call_output`; the rest
//! of the log (notes, summaries, failures, cleared markers, artifacts, and the empty message
//! that carries tool results to a turn) is no item. An item's id is its kind and its event's seq
//! (`msg_7`), so it names one event of the log for good.

use serde::Deserialize;
use serde_json::{json, Value};

use super::ResponsesError;
use crate::call::Entry;
use crate::state::{Event, EventKind, OutputStatus, ToolCallRead, ToolStatus};

/// An item a client sends: a message (role and text, as a string or text parts), a function
/// call it keeps in its own history, a function call's output, or an MCP call this server
/// reported earlier. Fields of other kinds are read as absent; `id` and `status` are accepted
/// on every kind (clients send back the items they were given).
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
pub struct InputItem {
    /// `message` (the default), `function_call`, `function_call_output` or `mcp_call`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The item's id, when it is one the client was given.
    #[serde(default)]
    pub id: Option<String>,
    /// A message's role: `user`, `assistant`, `system` or `developer`.
    #[serde(default)]
    pub role: Option<String>,
    /// A message's content: a string, or parts `{"type": "input_text" | "output_text" | "text",
    /// "text"}`.
    #[serde(default)]
    #[cfg_attr(feature = "http", schema(value_type = Object))]
    pub content: Option<Value>,
    /// An assistant message's refusal, as a chat completion answers one (with `content: null`);
    /// sent back as history, it stands for the message's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// A function call's (or its output's) id.
    #[serde(default)]
    pub call_id: Option<String>,
    /// A function or MCP call's tool.
    #[serde(default)]
    pub name: Option<String>,
    /// A function or MCP call's arguments, as a JSON string.
    #[serde(default)]
    pub arguments: Option<String>,
    /// A function call's output (a string, or text parts), or an MCP call's.
    #[serde(default)]
    #[cfg_attr(feature = "http", schema(value_type = Object))]
    pub output: Option<Value>,
    /// An MCP call's server.
    #[serde(default)]
    pub server_label: Option<String>,
    /// An MCP call's error.
    #[serde(default)]
    #[cfg_attr(feature = "http", schema(value_type = Object))]
    pub error: Option<Value>,
}

/// A message's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// Instructions (`system` or `developer`).
    Instructions,
}

/// What an input item says.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// A message.
    Message {
        /// Whose.
        role: Role,
        /// Its text (parts joined by blank lines).
        text: String,
    },
    /// A function call the client keeps in its history.
    Call {
        /// The call's id.
        call_id: String,
        /// The function.
        name: String,
        /// The arguments, as given.
        arguments: String,
    },
    /// A function call's output.
    Output {
        /// The call it answers.
        call_id: String,
        /// What the function returned.
        output: String,
    },
    /// An MCP call this server reported, sent back: a call and its result at once.
    McpCall {
        /// The call's id (the item's).
        call_id: String,
        /// The tool.
        name: String,
        /// The arguments, as given.
        arguments: String,
        /// The output, or the error.
        output: String,
    },
}

impl Said {
    /// The log entries it becomes (a system message becomes none: it is the turn's
    /// instructions).
    pub(crate) fn entries(self) -> Vec<Entry> {
        match self {
            Said::Message {
                role: Role::User,
                text,
            } => vec![Entry::User(text)],
            Said::Message {
                role: Role::Assistant,
                text,
            } => vec![Entry::Agent(text)],
            Said::Message { .. } => Vec::new(),
            Said::Call {
                call_id,
                name,
                arguments,
            } => vec![Entry::ToolCall {
                call_id,
                name,
                arguments: arguments_value(&arguments),
            }],
            Said::Output { call_id, output } => vec![Entry::ToolResult { call_id, output }],
            Said::McpCall {
                call_id,
                name,
                arguments,
                output,
            } => vec![
                Entry::ToolCall {
                    call_id: call_id.clone(),
                    name,
                    arguments: arguments_value(&arguments),
                },
                Entry::ToolResult { call_id, output },
            ],
        }
    }
}

/// Arguments as stored: the JSON they spell, or the string itself when they spell none.
fn arguments_value(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// Text from a string or text parts; `what` names it in a refusal.
fn text_of(value: &Value, what: &str) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("input_text" | "output_text" | "text", Some(text)) => texts.push(text),
                    // A response's refusal part, sent back as history.
                    ("refusal", _) => match part.get("refusal").and_then(Value::as_str) {
                        Some(refusal) => texts.push(refusal),
                        None => return Err(format!("a refusal part in {what} needs its refusal")),
                    },
                    _ => {
                        return Err(format!(
                            "content parts of type {kind:?} are not supported in {what}; only \
                             text is"
                        ))
                    }
                }
            }
            Ok(texts.join("\n\n"))
        }
        _ => Err(format!("{what} is a string or text parts")),
    }
}

fn field<'a>(value: &'a Option<String>, kind: &str, name: &str) -> Result<&'a str, String> {
    value
        .as_deref()
        .ok_or_else(|| format!("a {kind} item needs its {name}"))
}

impl InputItem {
    /// What the item says, or why it is refused.
    pub fn said(&self) -> Result<Said, String> {
        match self.kind.as_deref().unwrap_or("message") {
            "message" => self.message(),
            "function_call" => Ok(Said::Call {
                call_id: field(&self.call_id, "function_call", "call_id")?.to_owned(),
                name: field(&self.name, "function_call", "name")?.to_owned(),
                arguments: self.arguments.clone().unwrap_or_default(),
            }),
            "function_call_output" => {
                let output = self
                    .output
                    .as_ref()
                    .ok_or("a function_call_output item needs its output")?;
                Ok(Said::Output {
                    call_id: field(&self.call_id, "function_call_output", "call_id")?.to_owned(),
                    output: text_of(output, "a function_call_output's output")?,
                })
            }
            "mcp_call" => {
                let output = match (&self.output, &self.error) {
                    (Some(Value::String(text)), _) => text.clone(),
                    (_, Some(error)) if !error.is_null() => format!("error: {error}"),
                    _ => String::new(),
                };
                let id = self.call_id.clone().or_else(|| self.id.clone());
                Ok(Said::McpCall {
                    call_id: id.ok_or("an mcp_call item needs its id")?,
                    name: field(&self.name, "mcp_call", "name")?.to_owned(),
                    arguments: self.arguments.clone().unwrap_or_default(),
                    output,
                })
            }
            other => Err(format!(
                "items of type {other:?} are not supported here; messages, function_call, \
                 function_call_output and mcp_call items are"
            )),
        }
    }

    fn message(&self) -> Result<Said, String> {
        let role = match self.role.as_deref() {
            None | Some("") => return Err("a message needs its role".into()),
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("system" | "developer") => Role::Instructions,
            Some(other) => {
                return Err(format!(
                    "messages of role {other:?} are not taken; user, assistant, system and \
                     developer are"
                ))
            }
        };
        let text = match (&self.content, &self.refusal) {
            (Some(content), _) => text_of(content, "a message's content")?,
            // A refusal sent back as history: the model's words all the same.
            (None, Some(refusal)) if role == Role::Assistant => refusal.clone(),
            (None, _) => return Err("a message needs its content".into()),
        };
        Ok(Said::Message { role, text })
    }
}

/// The log entries of messages added to a conversation without a turn: user and assistant
/// messages, function calls and their outputs (a system message has no place in a log).
pub(crate) fn entries_of(items: &[InputItem]) -> Result<Vec<Entry>, ResponsesError> {
    let mut entries = Vec::with_capacity(items.len());
    for item in items {
        let said = item
            .said()
            .map_err(|e| ResponsesError::invalid("items", e))?;
        if let Said::Message {
            role: Role::Instructions,
            ..
        } = said
        {
            return Err(ResponsesError::invalid(
                "items",
                "system and developer messages cannot be added to a conversation; add user or \
                 assistant messages, and give instructions with a response",
            ));
        }
        entries.extend(said.entries());
    }
    Ok(entries)
}

/// The item an event shows as in a conversation's listing, if it is one.
pub fn item_of(event: &Event) -> Option<Value> {
    let seq = event.seq;
    Some(match &event.kind {
        // An empty message only carries tool results to its turn.
        EventKind::UserInput { text, .. } if text.is_empty() => return None,
        EventKind::UserInput { text, .. } => json!({
            "type": "message", "id": format!("msg_{seq}"), "status": "completed",
            "role": "user", "content": [{"type": "input_text", "text": text}],
        }),
        EventKind::AgentOutput {
            text,
            status: OutputStatus::Refused,
            ..
        } => refusal(&format!("msg_{seq}"), text),
        EventKind::AgentOutput { text, status, .. } => json!({
            "type": "message", "id": format!("msg_{seq}"),
            "status": match status { OutputStatus::Final => "completed", _ => "incomplete" },
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        EventKind::ToolCall {
            call_id,
            name,
            arguments,
            ..
        } => json!({
            "type": "function_call", "id": format!("fc_{seq}"), "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments_text(arguments),
        }),
        EventKind::ToolResult {
            call_id,
            result,
            status,
            ..
        } => json!({
            "type": "function_call_output", "id": format!("fco_{seq}"),
            "status": if *status == ToolStatus::Ok { "completed" } else { "incomplete" },
            "call_id": call_id,
            "output": result_text(result),
        }),
        _ => return None,
    })
}

/// A call's arguments as OpenAI carries them: a JSON string.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A result as text: strings as they are, other values as JSON.
pub(crate) fn result_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The output item a tool call of a response shows as: a call of an MCP server's tool is an
/// `mcp_call` with its output (or error); a call left to the client is a `function_call` for it
/// to run; a call of the agent's own tools is none (it ran inside the server, and the
/// conversation's items show it). Its id is made of the call's, so that a streamed response
/// and its final object name it alike.
pub(crate) fn output_item(call: &ToolCallRead) -> Option<Value> {
    match (&call.server, &call.result) {
        (Some(server), result) => {
            let (output, error) = match result {
                Some(r) if r.status == ToolStatus::Ok => (Some(result_text(&r.result)), None),
                Some(r) if r.status == ToolStatus::Cancelled => (
                    None,
                    Some("cancelled: the response was interrupted".to_owned()),
                ),
                Some(r) => (None, Some(result_text(&r.result))),
                None => (None, None),
            };
            Some(json!({
                "type": "mcp_call", "id": format!("mcp_{}", call.call_id),
                "status": if error.is_some() { "failed" } else { "completed" },
                "server_label": server, "name": call.name,
                "arguments": arguments_text(&call.arguments),
                "output": output, "error": error,
            }))
        }
        (None, None) => Some(json!({
            "type": "function_call", "id": format!("fc_{}", call.call_id), "status": "completed",
            "call_id": call.call_id, "name": call.name,
            "arguments": arguments_text(&call.arguments),
        })),
        (None, Some(_)) => None,
    }
}

/// The assistant message item of a response's output.
pub(crate) fn message(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The assistant message item of a model's refusal: a `refusal` content part, not text.
pub(crate) fn refusal(id: &str, refusal: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": "completed", "role": "assistant",
        "content": [{"type": "refusal", "refusal": refusal}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Author;

    fn item(value: Value) -> InputItem {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_refusal_sent_back_as_history_is_the_models_words() {
        let assistant = |text: &str| Said::Message {
            role: Role::Assistant,
            text: text.into(),
        };
        let chat = item(json!({"role": "assistant", "content": null, "refusal": "I can't."}));
        assert_eq!(chat.said(), Ok(assistant("I can't.")));
        let parts = json!([{"type": "refusal", "refusal": "I can't."}]);
        let response = item(json!({"type": "message", "role": "assistant", "content": parts}));
        assert_eq!(response.said(), Ok(assistant("I can't.")));
        let user = item(json!({"role": "user", "content": null, "refusal": "x"}));
        assert!(user.said().is_err(), "only the model refuses");
        let empty = item(json!({"role": "assistant", "content": [{"type": "refusal"}]}));
        assert!(empty.said().is_err());
    }

    #[test]
    fn only_messages_and_tool_events_are_items_and_the_empty_message_is_none() {
        let input = |text: &str| {
            let kind = EventKind::UserInput {
                text: text.into(),
                disposition: Default::default(),
            };
            Event::new(3, Author::User, 0, kind)
        };
        let shown = item_of(&input("hi")).unwrap();
        assert_eq!(shown["id"], "msg_3");
        assert_eq!(shown["role"], "user");
        assert_eq!(shown["content"][0]["text"], "hi");
        assert!(item_of(&input("")).is_none());
        let note = Event::new(4, Author::System, 0, EventKind::Note { text: "n".into() });
        assert!(item_of(&note).is_none());
    }

    #[test]
    fn every_kind_a_client_sends_is_read_or_refused_saying_why() {
        let parts = item(json!({"role": "user", "content": [
            {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}));
        assert_eq!(
            parts.said().unwrap(),
            Said::Message {
                role: Role::User,
                text: "a\n\nb".into()
            }
        );
        let sent_back = item(
            json!({"type": "message", "id": "msg_1", "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": "hi",
            "annotations": []}]}),
        );
        assert!(matches!(
            sent_back.said().unwrap(),
            Said::Message {
                role: Role::Assistant,
                ..
            }
        ));
        let call = item(
            json!({"type": "function_call", "call_id": "c", "name": "add",
            "arguments": "{\"a\":1}", "id": "fc_1", "status": "completed"}),
        );
        assert_eq!(
            call.said().unwrap().entries(),
            vec![Entry::ToolCall {
                call_id: "c".into(),
                name: "add".into(),
                arguments: json!({"a": 1})
            }]
        );
        let output = item(json!({"type": "function_call_output", "call_id": "c",
            "output": "5"}));
        assert_eq!(
            output.said().unwrap().entries(),
            vec![Entry::ToolResult {
                call_id: "c".into(),
                output: "5".into()
            }]
        );
        for (bad, says) in [
            (
                json!({"role": "user", "content": [{"type": "input_image"}]}),
                "input_image",
            ),
            (json!({"role": "user"}), "content"),
            (json!({"content": "hi"}), "role"),
            (json!({"role": "tool", "content": "hi"}), "tool"),
            (json!({"type": "reasoning"}), "reasoning"),
            (
                json!({"type": "function_call_output", "output": "x"}),
                "call_id",
            ),
        ] {
            let refusal = item(bad.clone()).said().unwrap_err();
            assert!(refusal.contains(says), "{bad}: {refusal}");
        }
        let system = item(json!({"role": "system", "content": "be brief"}));
        assert!(entries_of(&[system]).is_err());
    }
}
