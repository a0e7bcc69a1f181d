//! Chat completions, for the clients that speak only that.
//!
//! Bound to a session (`session` given, `X-Session-Id` over HTTP) a completion is a turn of that
//! session of the acting user: its last user message is the turn's message, and the earlier
//! messages are not taken again (the session's own history is the context). Unbound, it is
//! stateless: a session of its own gets the earlier user and assistant messages (in the same
//! write as the turn), runs the last user message, and is deleted once answered. System and
//! developer messages are the turn's instructions, for an agent that acts on them.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::items::{InputItem, Role, Said};
use super::request::MAX_INPUT_ITEMS;
use super::{check_model, new_id, now_seconds, Responses, ResponsesError};
use crate::agent::{
    INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
use crate::call::{Attributes, CallOptions, Entry, Outcome, OutcomeKind};
use crate::error::Error;
use crate::key::SessionKey;
use crate::runtime::Runtime;
use crate::state::{IncompleteReason, InterruptReason, Usage};
use crate::stream::{StreamEvent, TurnStream};

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

fn invalid(param: &str, message: impl Into<String>) -> ResponsesError {
    ResponsesError::invalid(param, message)
}

impl ChatRequest {
    /// Reads a request body; refuses it naming the first field it cannot act on.
    pub fn from_json(body: Value) -> Result<Self, ResponsesError> {
        let digest = super::request::fingerprint(&body);
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
        super::request::check_sampling(self.temperature, self.top_p)?;
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

/// What a chat completion gives.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChatAnswer {
    /// The completion, once its turn is stored.
    Completion(ChatCompletion),
    /// `stream`: its chunks.
    Chunks(ChatChunks),
}

/// A future of a completion object (or the turn's error). Dropping it leaves the turn running.
#[derive(Debug)]
pub struct ChatCompletion(oneshot::Receiver<Result<Value, Error>>);

impl Future for ChatCompletion {
    type Output = Result<Value, ResponsesError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|answer| match answer {
            Ok(Ok(object)) => Ok(object),
            Ok(Err(error)) => Err(ResponsesError::Runtime(error)),
            Err(_) => Err(ResponsesError::Internal(
                "the completion's task ended without an answer".into(),
            )),
        })
    }
}

/// What every chunk repeats.
#[derive(Debug, Clone)]
struct Head {
    id: String,
    created: u64,
    model: String,
}

impl Head {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
    }

    fn completion(&self, outcome: &Outcome) -> Value {
        // A refusal is not content: OpenAI's clients read it from `refusal`.
        let (content, refusal) = match outcome.kind {
            OutcomeKind::Refused => (None, Some(&outcome.output)),
            _ => (Some(&outcome.output), None),
        };
        json!({
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason(outcome.kind), "logprobs": null}],
            "usage": usage(outcome.usage),
        })
    }
}

/// A streamed completion's chunks: the role, the deltas, the finish reason, the usage when
/// asked for; [`ChatChunk::Failed`] ends it on an error. The caller sends `[DONE]` after the
/// last.
#[derive(Debug)]
pub struct ChatChunks {
    head: Head,
    stream: Option<TurnStream>,
    include_usage: bool,
    /// Deletes the session after the last chunk (a stateless completion).
    forget: Option<(Runtime, SessionKey)>,
    queue: std::collections::VecDeque<ChatChunk>,
}

/// One chunk of a streamed completion.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChatChunk {
    /// A `chat.completion.chunk` object.
    Chunk(Value),
    /// The turn failed: the last chunk.
    Failed(Error),
}

impl ChatChunks {
    /// The next chunk; `None` after the last.
    pub async fn next(&mut self) -> Option<ChatChunk> {
        loop {
            if let Some(chunk) = self.queue.pop_front() {
                return Some(chunk);
            }
            let stream = self.stream.as_mut()?;
            match stream.next().await {
                Some(StreamEvent::Chunk(text)) => {
                    let chunk = self.head.chunk(json!({"content": text}), None);
                    return Some(ChatChunk::Chunk(chunk));
                }
                Some(StreamEvent::Outcome(Ok(outcome))) => {
                    if outcome.kind == OutcomeKind::Refused {
                        let refusal = json!({"refusal": outcome.output});
                        self.queue
                            .push_back(ChatChunk::Chunk(self.head.chunk(refusal, None)));
                    }
                    let reason = finish_reason(outcome.kind);
                    self.queue
                        .push_back(ChatChunk::Chunk(self.head.chunk(json!({}), Some(reason))));
                    if self.include_usage {
                        let mut last = self.head.chunk(json!({}), None);
                        last["choices"] = json!([]);
                        last["usage"] = usage(outcome.usage);
                        self.queue.push_back(ChatChunk::Chunk(last));
                    }
                    self.end();
                }
                Some(StreamEvent::Outcome(Err(error))) => {
                    self.queue.push_back(ChatChunk::Failed(error));
                    self.end();
                }
                // Chat completions stream text only.
                Some(_) => {}
                None => {
                    self.end();
                    return None;
                }
            }
        }
    }

    fn end(&mut self) {
        self.stream = None;
        if let Some((runtime, key)) = self.forget.take() {
            forget(runtime, key);
        }
    }
}

impl Drop for ChatChunks {
    fn drop(&mut self) {
        // A reader gone before the end: the stateless session still goes, once its turn ends.
        if let (Some(stream), Some((runtime, key))) = (self.stream.take(), self.forget.take()) {
            tokio::spawn(async move {
                let _ = stream.outcome().await;
                forget(runtime, key);
            });
        }
    }
}

fn finish_reason(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Completed | OutcomeKind::Merged | OutcomeKind::Refused => "stop",
        OutcomeKind::Incomplete(IncompleteReason::MaxTokens) => "length",
        OutcomeKind::Incomplete(IncompleteReason::ContentFilter) => "content_filter",
        OutcomeKind::Interrupted(InterruptReason::ReplyLimit) => "length",
        // Cut short otherwise: the closest of OpenAI's reasons.
        OutcomeKind::Interrupted(_) | OutcomeKind::Superseded => "length",
    }
}

fn usage(usage: Option<Usage>) -> Value {
    match usage {
        Some(u) => json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens.saturating_add(u.output_tokens)}),
        None => Value::Null,
    }
}

/// Deletes a stateless completion's session, on its own task so that a disconnect cannot
/// leave it behind.
fn forget(runtime: Runtime, key: SessionKey) {
    tokio::spawn(async move {
        if let Err(error) = runtime.delete(&key).await {
            tracing::warn!(%key, %error, "a stateless chat completion's session was not deleted");
        }
    });
}

impl Responses {
    /// Answers a chat completion for `user`: a turn of `session` when given, else a turn of a
    /// session used once. With `idempotency_key` (and a session), a retry is answered with the
    /// first attempt's outcome and completion id, and runs once.
    pub async fn chat(
        &self,
        user: &str,
        session: Option<&str>,
        request: ChatRequest,
        idempotency_key: Option<&str>,
    ) -> Result<ChatAnswer, ResponsesError> {
        let attributes = self.chat_attributes(&request)?;
        let runtime = self.runtime().clone();
        let (key, once) = match session {
            Some(session) => (SessionKey::new(user, session).map_err(Error::from)?, false),
            None => (
                SessionKey::new(user, new_id("chat_", None)).map_err(Error::from)?,
                true,
            ),
        };
        let mut options =
            CallOptions::default().with_attributes(Arc::new(attributes) as Attributes);
        if once && idempotency_key.is_some() {
            return Err(invalid(
                "Idempotency-Key",
                "a stateless chat completion keeps nothing a retry could be answered from: send \
                 its Idempotency-Key with an X-Session-Id, or leave it out",
            ));
        }
        let seed = match (once, idempotency_key) {
            (false, Some(k)) => {
                options.request_id = Some(k.to_owned());
                options.fingerprint = Some(request.fingerprint.clone());
                Some(format!("{user}\0{}\0{k}", key.session_id()))
            }
            _ => None,
        };
        if once {
            options.preceding = request.earlier;
        }
        let head = Head {
            id: new_id("chatcmpl-", seed.as_deref()),
            created: now_seconds(),
            model: request
                .model
                .unwrap_or_else(|| self.inner.default_model.clone()),
        };
        let stream = runtime
            .call_streaming(&key, request.message, options)
            .await?;
        let forget_after = once.then(|| (runtime.clone(), key.clone()));
        if request.stream {
            let first = head.chunk(json!({"role": "assistant", "content": ""}), None);
            return Ok(ChatAnswer::Chunks(ChatChunks {
                head,
                stream: Some(stream),
                include_usage: request.include_usage,
                forget: forget_after,
                queue: [ChatChunk::Chunk(first)].into(),
            }));
        }
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let answer = stream.outcome().await;
            if let Some((runtime, key)) = forget_after {
                forget(runtime, key);
            }
            let _ = tx.send(answer.map(|outcome| head.completion(&outcome)));
        });
        Ok(ChatAnswer::Completion(ChatCompletion(rx)))
    }

    fn chat_attributes(
        &self,
        request: &ChatRequest,
    ) -> Result<HashMap<String, Value>, ResponsesError> {
        let acts = self.runtime().agent_attributes();
        let mut attributes = HashMap::new();
        let wanted = [
            (
                "messages",
                INSTRUCTIONS_ATTRIBUTE,
                request.instructions.clone().map(Value::from),
            ),
            (
                "temperature",
                TEMPERATURE_ATTRIBUTE,
                request.temperature.map(Value::from),
            ),
            ("top_p", TOP_P_ATTRIBUTE, request.top_p.map(Value::from)),
            (
                "max_tokens",
                MAX_TOKENS_ATTRIBUTE,
                request.max_tokens.map(Value::from),
            ),
            (
                "response_format",
                RESPONSE_FORMAT_ATTRIBUTE,
                request.response_format.clone(),
            ),
        ];
        for (param, attribute, value) in wanted {
            let Some(value) = value else { continue };
            if !acts.contains(&attribute) {
                let what = match param {
                    "messages" => "system and developer messages are",
                    _ => "it is",
                };
                return Err(invalid(
                    param,
                    format!(
                        "{param}: {what} not supported by this server's agent, which would not \
                         act on them; leave them out (serve --agent openai acts on them)"
                    ),
                ));
            }
            attributes.insert(attribute.to_owned(), value);
        }
        Ok(attributes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
