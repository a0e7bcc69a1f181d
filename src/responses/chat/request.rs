//! A chat completion request read from its JSON: every field acted on or refused by name, the
//! messages sorted into the turn's message, the earlier ones and the instructions.

use serde_json::{Map, Value};

use crate::call::Entry;
use crate::responses::items::{InputItem, Role, Said};
use crate::responses::request::MAX_INPUT_ITEMS;
use crate::responses::{check_model, ResponsesError};

/// Every field a chat completion request may carry here; the others are refused unless `null`.
const FIELDS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "n",
];

/// A chat completion request, as this server acts on it.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The model named (recorded in the answer; the session's agent answers).
    pub model: Option<String>,
    /// The turn's message: the last message, the user's.
    pub message: String,
    /// The messages before it, as log entries (taken by a stateless completion only).
    pub earlier: Vec<Entry>,
    /// The system and developer messages, joined.
    pub instructions: Option<String>,
    /// Answer as `data:` chunks.
    pub stream: bool,
    /// Add a last chunk with the usage.
    pub include_usage: bool,
    /// Sampling, length and format, handed to an agent that acts on them.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `max_tokens` or `max_completion_tokens`.
    pub max_tokens: Option<u64>,
    /// `response_format`, as given.
    pub response_format: Option<Value>,
    /// The body, digested: a retry (same `Idempotency-Key`) with another body is refused.
    pub fingerprint: String,
}

pub(super) fn invalid(param: &str, message: impl Into<String>) -> ResponsesError {
    ResponsesError::invalid(param, message)
}

impl ChatRequest {
    /// Reads a request body; refuses it naming the first field it cannot act on.
    pub fn from_json(body: Value) -> Result<Self, ResponsesError> {
        let digest = crate::responses::request::fingerprint(&body);
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
                    "{name} is not supported by this server's chat completions; leave it out \
                     (the fields it acts on are: {})",
                    FIELDS.join(", ")
                ),
            ));
        }
        let mut request = Self {
            fingerprint: digest,
            ..Self::default()
        };
        request.read_settings(&body)?;
        request.read_messages(&body)?;
        Ok(request)
    }

    fn read_settings(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        let given = |name: &str| body.get(name).filter(|v| !v.is_null());
        if let Some(model) = given("model") {
            let model = model
                .as_str()
                .ok_or_else(|| invalid("model", "model must be a string"))?;
            check_model(model)?;
            self.model = Some(model.to_owned());
        }
        if let Some(n) = given("n") {
            if n.as_u64() != Some(1) {
                return Err(invalid("n", "n must be 1: a turn has one answer"));
            }
        }
        self.stream = match given("stream") {
            None => false,
            Some(value) => value
                .as_bool()
                .ok_or_else(|| invalid("stream", "stream must be true or false"))?,
        };
        if let Some(options) = given("stream_options") {
            let Some(options) = options.as_object() else {
                return Err(invalid("stream_options", "stream_options is an object"));
            };
            for (name, value) in options {
                match (name.as_str(), value) {
                    ("include_usage", Value::Bool(include)) => self.include_usage = *include,
                    (_, Value::Null) => {}
                    _ => {
                        return Err(invalid(
                            "stream_options",
                            format!("stream_options.{name} is not supported; include_usage is"),
                        ))
                    }
                }
            }
        }
        let number = |name: &str| -> Result<Option<f64>, ResponsesError> {
            given(name)
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| invalid(name, format!("{name} must be a number")))
                })
                .transpose()
        };
        self.temperature = number("temperature")?;
        self.top_p = number("top_p")?;
        crate::responses::request::check_sampling(self.temperature, self.top_p)?;
        for name in ["max_tokens", "max_completion_tokens"] {
            if let Some(value) = given(name) {
                let most = value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| invalid(name, format!("{name} must be a positive integer")))?;
                self.max_tokens = Some(most);
            }
        }
        if let Some(format) = given("response_format") {
            let schema = format.get("json_schema");
            let named = schema
                .and_then(|s| s.get("name"))
                .is_some_and(Value::is_string);
            let shaped = schema
                .and_then(|s| s.get("schema"))
                .is_some_and(Value::is_object);
            match format.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some("json_object") => self.response_format = Some(format.clone()),
                Some("json_schema") if named && shaped => {
                    self.response_format = Some(format.clone())
                }
                Some("json_schema") => {
                    return Err(invalid(
                        "response_format",
                        "a json_schema response_format needs json_schema.name and \
                         json_schema.schema",
                    ))
                }
                _ => {
                    return Err(invalid(
                        "response_format",
                        "response_format is of type text, json_object or json_schema",
                    ))
                }
            }
        }
        Ok(())
    }

    fn read_messages(&mut self, body: &Map<String, Value>) -> Result<(), ResponsesError> {
        let messages: Vec<InputItem> = match body.get("messages") {
            Some(messages @ Value::Array(_)) => serde_json::from_value(messages.clone())
                .map_err(|e| invalid("messages", format!("messages are objects: {e}")))?,
            _ => return Err(invalid("messages", "messages is a list of messages")),
        };
        if messages.is_empty() || messages.len() > MAX_INPUT_ITEMS {
            return Err(invalid(
                "messages",
                format!("messages holds 1 to {MAX_INPUT_ITEMS} messages"),
            ));
        }
        let mut said = Vec::with_capacity(messages.len());
        let mut told = Vec::new();
        for (at, message) in messages.iter().enumerate() {
            if message.kind.is_some() || message.role.as_deref() == Some("tool") {
                return Err(invalid(
                    "messages",
                    format!(
                        "messages[{at}]: only user, assistant, system and developer messages \
                         with text are supported here (no tool messages)"
                    ),
                ));
            }
            match message
                .said()
                .map_err(|e| invalid("messages", format!("messages[{at}]: {e}")))?
            {
                Said::Message {
                    role: Role::Instructions,
                    text,
                } => told.push(text),
                other => said.push(other),
            }
        }
        match said.pop() {
            Some(Said::Message {
                role: Role::User,
                text,
            }) => self.message = text,
            _ => return Err(invalid("messages", "the last message must be the user's")),
        }
        self.earlier = said.into_iter().flat_map(Said::entries).collect();
        self.instructions = (!told.is_empty()).then(|| told.join("\n\n"));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_message_is_the_turn_and_system_ones_are_instructions() {
        let request = ChatRequest::from_json(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": [{"type": "text", "text": "again"}]},
            ],
            "stream": true, "stream_options": {"include_usage": true},
            "max_completion_tokens": 9,
        }))
        .unwrap();
        assert_eq!(request.message, "again");
        assert_eq!(request.instructions.as_deref(), Some("be brief"));
        assert_eq!(
            request.earlier,
            vec![Entry::User("hi".into()), Entry::Agent("hello".into())]
        );
        assert!(request.stream && request.include_usage);
        assert_eq!(request.max_tokens, Some(9));
    }

    #[test]
    fn what_is_not_acted_on_is_refused_by_name() {
        let param = |body: Value| match ChatRequest::from_json(body.clone()) {
            Err(ResponsesError::Invalid { param, .. }) => param,
            other => panic!("{body} was not refused: {other:?}"),
        };
        let hi = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(param(json!({"messages": hi, "tools": []})), "tools");
        assert_eq!(param(json!({"messages": hi, "n": 2})), "n");
        assert_eq!(param(json!({"messages": hi, "logprobs": true})), "logprobs");
        assert_eq!(
            param(json!({"messages": [{"role": "assistant", "content": "x"}]})),
            "messages"
        );
        assert_eq!(
            param(json!({"messages": [{"role": "tool", "content": "x", "tool_call_id": "c"}]})),
            "messages"
        );
        assert!(ChatRequest::from_json(json!({"messages": hi, "logprobs": null})).is_ok());
    }
}
