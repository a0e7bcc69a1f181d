//! `POST /v1/chat/completions`, for the clients that speak only that: a turn of the session
//! [`SESSION_HEADER`] names, or of a session used once ([`crate::responses`] decides; this
//! handler reads the request and formats the completion or its `data:` chunks).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::{acting_user, refusal, SESSION_HEADER};
use crate::http::answer::{checked_idempotency_key, within};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::gateway::Gateway;
use crate::responses::{ChatAnswer, ChatChunk, ChatChunks, ChatRequest};

/// `POST /v1/chat/completions`, as documented: the library reads the body field by field
/// ([`ChatRequest::from_json`]) and refuses, naming it, any field it does not act on.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatBody {
    /// Recorded in the answer; the session's agent answers whatever it names.
    model: Option<String>,
    /// Up to 1,025 messages (`user`, `assistant`, `system` or `developer`, text only); the last
    /// must be the user's.
    #[schema(value_type = Vec<Object>)]
    messages: Value,
    /// Answer as `data:` chunks ending with `data: [DONE]`.
    stream: Option<bool>,
    /// `{"include_usage": true}` adds a last chunk with the usage.
    #[schema(value_type = Option<Object>)]
    stream_options: Option<Value>,
    /// Sampling temperature.
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
    /// Nucleus sampling.
    #[schema(minimum = 0, maximum = 1)]
    top_p: Option<f64>,
    /// The most tokens the answer may take (`max_completion_tokens` alike).
    #[schema(minimum = 1)]
    max_tokens: Option<u64>,
    /// The most tokens the answer may take.
    #[schema(minimum = 1)]
    max_completion_tokens: Option<u64>,
    /// `{"type": "text" | "json_object" | "json_schema", …}`.
    #[schema(value_type = Option<Object>)]
    response_format: Option<Value>,
    /// Only 1.
    #[schema(minimum = 1, maximum = 1)]
    n: Option<u64>,
}

/// A chat completion: a turn of the session [`SESSION_HEADER`] names, or of a session used
/// once. Every field is acted on or refused by name.
#[utoipa::path(post, path = "/v1/chat/completions", tag = "openai",
    params(("X-Session-Id" = Option<String>, Header,
        description = "Run the completion as a turn of this session of the acting user"),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$",
        description = "With X-Session-Id: a retry gets the first outcome and completion id")),
    request_body = ChatBody,
    responses((status = 200, description = "The completion, or its chunks",
        content((Object = "application/json"), (String = "text/event-stream"))),
        crate::http::schema::Refusals))]
pub(crate) async fn chat_completions(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    let request = match ChatRequest::from_json(body) {
        Ok(request) => request,
        Err(error) => return Ok(refusal(error)),
    };
    let session = headers
        .get(SESSION_HEADER)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let key = checked_idempotency_key(&headers)?;
    let timeout = gateway.config().request_timeout;
    let answer = Box::pin(gateway.responses().chat(
        &user,
        session.as_deref(),
        request,
        key.as_deref(),
    ))
    .await;
    Ok(match answer {
        Err(error) => refusal(error),
        Ok(ChatAnswer::Chunks(chunks)) => chunk_events(chunks, timeout),
        Ok(ChatAnswer::Completion(completion)) => match within(timeout, false, completion).await? {
            Ok(object) => Json(object).into_response(),
            Err(error) => refusal(error),
        },
    })
}

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

/// Where a streamed completion's events stand.
enum Next {
    Chunks(ChatChunks),
    /// `[DONE]` is still to send.
    Done,
}

/// The completion as `data:` chunks, then `data: [DONE]`. A failure ends the chunks with an
/// `error` object; the request timeout bounds the wait for each next chunk.
fn chunk_events(chunks: ChatChunks, timeout: Duration) -> Response {
    let events = futures::stream::unfold(Some(Next::Chunks(chunks)), move |next| async move {
        let mut chunks = match next? {
            Next::Chunks(chunks) => chunks,
            Next::Done => return Some((Ok(Event::default().data("[DONE]")), None)),
        };
        let (event, rest) = match tokio::time::timeout(timeout, chunks.next()).await {
            Ok(Some(ChatChunk::Chunk(chunk))) => (data(&chunk), Next::Chunks(chunks)),
            Ok(Some(ChatChunk::Failed(error))) => {
                (data(&ApiError::from(error).of_turn().body()), Next::Done)
            }
            Ok(None) => return Some((Ok(Event::default().data("[DONE]")), None)),
            Err(_) => {
                let error = ApiError::Timeout {
                    after: timeout,
                    interrupted: false,
                };
                (data(&error.body()), Next::Done)
            }
        };
        Some((Ok::<_, Infallible>(event), Some(rest)))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
