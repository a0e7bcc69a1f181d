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
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::{new_id, now_seconds, Responses, ResponsesError};
use crate::agent::{
    INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
use crate::call::{Attributes, CallOptions, Outcome, OutcomeKind};
use crate::error::Error;
use crate::key::SessionKey;
use crate::runtime::Runtime;
use crate::state::{IncompleteReason, InterruptReason, Usage};
use crate::stream::{StreamEvent, TurnStream};

mod request;

use request::invalid;
pub use request::ChatRequest;

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
