//! `POST /v1/chat/completions`, for the clients that speak only that.
//!
//! With [`SESSION_HEADER`] the completion is a turn of that session of the acting user: only
//! the request's last user message is the turn's input, and its earlier messages are ignored
//! (the session's own history is the context). Without it the completion is stateless: a
//! session of its own gets the earlier user and assistant messages, runs the last user message
//! as its turn, and is deleted once answered.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::items::InputItem;
use super::{about, acting_user, check_model, new_id, now_seconds, MAX_ITEMS, SESSION_HEADER};
use crate::call::{CallOptions, Entry, OutcomeKind};
use crate::http::answer::{idempotency_key, within};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::gateway::Gateway;
use crate::key::SessionKey;
use crate::runtime::Runtime;
use crate::stream::StreamEvent;

/// `POST /v1/chat/completions`. Fields not listed are accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct ChatBody {
    /// Recorded in the answer; the session's agent answers whatever it names.
    #[serde(default)]
    model: Option<String>,
    /// Up to 20 messages; the last must be the user's.
    messages: Vec<InputItem>,
    /// Answer as `data:` chunks ending with `data: [DONE]`.
    #[serde(default)]
    stream: Option<bool>,
    /// `{"include_usage": true}` adds a last chunk with the usage.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    stream_options: Option<StreamOptions>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The turn's input and, for a stateless completion, the messages before it.
/// A refusal is boxed: a response is large, and the common path is the `Ok`.
fn split(messages: Vec<InputItem>) -> Result<(Vec<Entry>, String), Box<Response>> {
    if messages.is_empty() || messages.len() > MAX_ITEMS {
        let error = ApiError::BadRequest(format!("messages holds 1 to {MAX_ITEMS} messages"));
        return Err(Box::new(about("messages", error)));
    }
    let mut earlier = Vec::with_capacity(messages.len());
    for message in &messages {
        match message.text().map_err(|e| Box::new(about("messages", e)))? {
            ("user", text) => earlier.push(Entry::User(text)),
            ("assistant", text) => earlier.push(Entry::Agent(text)),
            // System prompts are the agent's (`--system-prompt`): left out.
            _ => {}
        }
    }
    match earlier.pop() {
        Some(Entry::User(last)) => Ok((earlier, last)),
        _ => Err(Box::new(about(
            "messages",
            ApiError::BadRequest("the last message must be the user's".into()),
        ))),
    }
}

/// A chat completion: a turn of the session [`SESSION_HEADER`] names, or of a session used
/// once.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "openai",
    params(("X-Session-Id" = Option<String>, Header,
        description = "Run the completion as a turn of this session of the acting user"),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$",
        description = "With X-Session-Id: a retry gets the first outcome")),
    request_body = ChatBody,
    responses((status = 200, description = "The completion, or its chunks",
        content((Object = "application/json"), (String = "text/event-stream"))),
        crate::http::schema::Refusals))]
pub(crate) async fn chat_completions(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ChatBody>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    let model = body
        .model
        .unwrap_or_else(|| gateway.default_model().to_owned());
    if let Err(error) = check_model(&model) {
        return Ok(about("model", error));
    }
    let (earlier, input) = match split(body.messages) {
        Ok(split) => split,
        Err(refusal) => return Ok(*refusal),
    };
    let named = headers
        .get(SESSION_HEADER)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let runtime = gateway.runtime().clone();
    let (key, once) = match named {
        Some(session) => (SessionKey::new(user, session)?, false),
        None => (SessionKey::new(user, new_id("chat_", None))?, true),
    };
    let mut options = CallOptions::default();
    if !once {
        options.request_id = idempotency_key(&headers);
    } else if !earlier.is_empty() {
        runtime.append(&key, earlier, Default::default()).await?;
    }
    let id = new_id("chatcmpl-", None);
    let head = Head {
        id,
        created: now_seconds(),
        model,
    };
    let timeout = gateway.config().request_timeout;
    if body.stream == Some(true) {
        let include_usage = body.stream_options.unwrap_or_default().include_usage;
        let stream = runtime
            .call_streaming(&key, input, options)
            .await
            .map_err(|e| ApiError::from(e).of_turn())?;
        return Ok(chunks(
            head,
            stream,
            include_usage,
            timeout,
            (runtime, key, once),
        ));
    }
    let call = {
        let (runtime, key) = (runtime.clone(), key.clone());
        tokio::spawn(async move { runtime.call_with(&key, input, options).await })
    };
    let answered = within(timeout, false, call).await?;
    if once {
        forget(runtime.clone(), key.clone());
    }
    let outcome = answered
        .map_err(|e| ApiError::Internal(format!("the turn's task ended without an answer: {e}")))?
        .map_err(|e| ApiError::from(e).of_turn())?;
    let usage = usage_of(&runtime, &key, outcome.seq).await;
    Ok(Json(json!({
        "id": head.id, "object": "chat.completion", "created": head.created, "model": head.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.output},
            "finish_reason": finish_reason(outcome.kind), "logprobs": null}],
        "usage": usage,
    }))
    .into_response())
}

/// What every chunk repeats.
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
}

fn finish_reason(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Completed | OutcomeKind::Merged => "stop",
        // Cut short: the closest of OpenAI's reasons.
        OutcomeKind::Interrupted(_) | OutcomeKind::Superseded => "length",
    }
}

/// The usage of the output event at `seq`, in chat-completions form.
async fn usage_of(runtime: &Runtime, key: &SessionKey, seq: u64) -> Value {
    let events = runtime.store().read_events(key, seq, 1).await.ok();
    let usage = events
        .into_iter()
        .flatten()
        .find_map(|event| match event.kind {
            crate::state::EventKind::AgentOutput { usage, .. } => usage,
            _ => None,
        });
    match usage {
        Some(u) => json!({"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens}),
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

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

/// The completion as `data:` chunks: the role, the deltas, the finish reason, the usage when
/// asked for, then `[DONE]`. A failure ends the chunks with an `error` object.
fn chunks(
    head: Head,
    stream: crate::stream::TurnStream,
    include_usage: bool,
    timeout: Duration,
    target: (Runtime, SessionKey, bool),
) -> Response {
    let head = Arc::new(head);
    let first = data(&head.chunk(json!({"role": "assistant", "content": ""}), None));
    let state = (Some(stream), Arc::new(target), head, include_usage);
    let rest = futures::stream::unfold(
        state,
        move |(stream, target, head, include_usage)| async move {
            let mut stream = stream?;
            let mut events = Vec::new();
            let done = match tokio::time::timeout(timeout, stream.next()).await {
                Ok(Some(StreamEvent::Chunk(text))) => {
                    events.push(data(&head.chunk(json!({"content": text}), None)));
                    false
                }
                Ok(Some(StreamEvent::Outcome(Ok(outcome)))) => {
                    let reason = finish_reason(outcome.kind);
                    events.push(data(&head.chunk(json!({}), Some(reason))));
                    if include_usage {
                        let usage = usage_of(&target.0, &target.1, outcome.seq).await;
                        let mut last = head.chunk(json!({}), None);
                        last["choices"] = json!([]);
                        last["usage"] = usage;
                        events.push(data(&last));
                    }
                    true
                }
                Ok(Some(StreamEvent::Outcome(Err(error)))) => {
                    events.push(data(&ApiError::from(error).of_turn().body()));
                    true
                }
                // Chat completions stream text only.
                Ok(Some(_)) => false,
                Ok(None) => true,
                Err(_) => {
                    let error = ApiError::Timeout {
                        after: timeout,
                        interrupted: false,
                    };
                    events.push(data(&error.body()));
                    true
                }
            };
            let next = if done {
                events.push(Event::default().data("[DONE]"));
                if target.2 {
                    forget(target.0.clone(), target.1.clone());
                }
                None
            } else {
                Some(stream)
            };
            let batch = futures::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
            Some((batch, (next, target, head, include_usage)))
        },
    )
    .flatten();
    let all = futures::stream::once(async move { Ok::<_, Infallible>(first) }).chain(rest);
    Sse::new(all)
        .keep_alive(KeepAlive::default())
        .into_response()
}
