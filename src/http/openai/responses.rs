//! `/v1/responses`: one response is one turn of the conversation's session — same FIFO,
//! overlap policy, idempotency and durability as `POST …/turns` — and it is read back from the
//! session's log, where its input carries the response's turn id as its request id. The
//! response object is built in `object.rs`; reading a response back (retrieve, cancel, input
//! items) is `reading.rs`.

mod object;
pub(crate) mod reading;

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use self::object::item_status;
pub(crate) use self::object::{message, status_of, Extra, Shape};
use self::reading::find;
use super::items::{last_seq, InputItem};
use super::stream::{response_events, Started};
use super::{
    about, acting_user, check_metadata, check_model, conversation_key, new_id, now_seconds,
    Metadata, ResponseId, MAX_ITEMS,
};
use crate::call::{Attributes, CallOptions, Outcome, OutcomeKind};
use crate::error::Error;
use crate::http::answer::{checked_idempotency_key, within};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::gateway::{Gateway, Running};
use crate::key::SessionKey;
use crate::state::EventKind;
use crate::store::Store;

/// The turn attribute `instructions` (and system or developer input messages) are handed to
/// the agent in.
pub const INSTRUCTIONS_ATTRIBUTE: &str = "openai.instructions";

/// `POST /v1/responses`. Fields not listed are accepted and ignored (sampling settings,
/// tools: the session's agent decides them).
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct CreateResponseBody {
    /// Recorded in the response; the session's agent answers whatever it names.
    #[serde(default)]
    model: Option<String>,
    /// A string, or up to 20 messages with text (`user`, or `system`/`developer` for
    /// instructions).
    #[schema(value_type = Object)]
    input: Input,
    /// Handed to the agent as the turn attribute `openai.instructions`.
    #[serde(default)]
    instructions: Option<String>,
    /// The conversation to run in: its id, or `{"id"}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    conversation: Option<ConversationRef>,
    /// Continue after this response: in its conversation when it is the newest there, else
    /// in a fork of it taken just after that response.
    #[serde(default)]
    previous_response_id: Option<String>,
    /// Up to 16 string pairs, echoed in the answer (not stored).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    metadata: Option<Metadata>,
    /// Answer as server-sent events.
    #[serde(default)]
    stream: Option<bool>,
    /// Must be `true` or absent: every turn is stored.
    #[serde(default)]
    store: Option<bool>,
}

/// A response's input.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Input {
    Text(String),
    Items(Vec<InputItem>),
}

/// A conversation named by id, or as an object.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ConversationRef {
    Id(String),
    Object { id: String },
}

/// A response's path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ResponsePath {
    /// The response's id (`resp_<32 hex>_<conversation>`).
    response: String,
}

/// The response's entry in the gateway's map of running responses, removed (and marked
/// finished) when the request is done with it.
pub(crate) struct Tracked {
    gateway: Gateway,
    id: String,
    running: Running,
}

impl Tracked {
    fn new(gateway: &Gateway, id: &str) -> Self {
        let running = Running::default();
        gateway
            .responses()
            .lock()
            .insert(id.to_owned(), running.clone());
        Self {
            gateway: gateway.clone(),
            id: id.to_owned(),
            running,
        }
    }

    /// Tells a waiting `POST …/cancel` that the outcome is in (and stored).
    pub(crate) fn finish(&self) {
        self.running.finished.cancel();
    }

    /// Whether `POST …/cancel` cancelled it.
    pub(crate) fn cancelled(&self) -> bool {
        self.running.cancel.is_cancelled()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.gateway.responses().lock().remove(&self.id);
        self.running.finished.cancel();
    }
}

/// The turn's input and instructions, from the request's `input` and `instructions`. A
/// refusal is boxed: a response is large, and the common path is the `Ok`.
fn turn_input(
    input: Input,
    instructions: Option<String>,
) -> Result<(String, Option<String>), Box<Response>> {
    let items = match input {
        Input::Text(text) => return Ok((text, instructions)),
        Input::Items(items) => items,
    };
    if items.is_empty() || items.len() > MAX_ITEMS {
        let error = ApiError::BadRequest(format!("input holds 1 to {MAX_ITEMS} messages"));
        return Err(Box::new(about("input", error)));
    }
    let (mut said, mut told) = (Vec::new(), Vec::from_iter(instructions));
    for item in &items {
        match item.text().map_err(|e| Box::new(about("input", e)))? {
            ("user", text) => said.push(text),
            ("system" | "developer", text) => told.push(text),
            (role, _) => {
                let error = ApiError::BadRequest(format!(
                    "input messages of role {role:?} are not taken: the conversation holds \
                     the history; add earlier assistant messages with POST \
                     /v1/conversations/{{id}}/items"
                ));
                return Err(Box::new(about("input", error)));
            }
        }
    }
    if said.is_empty() {
        let error = ApiError::BadRequest("input holds no user message".into());
        return Err(Box::new(about("input", error)));
    }
    let told = (!told.is_empty()).then(|| told.join("\n\n"));
    Ok((said.join("\n\n"), told))
}

/// Runs one turn and answers it as a response object, or as OpenAI's typed events.
#[utoipa::path(post, path = "/v1/responses", tag = "openai",
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$",
        description = "A retry with the same key gets the first attempt's response, stored once")),
    request_body = CreateResponseBody,
    responses((status = 200, description = "The response, or its events",
        content((Object = "application/json"), (String = "text/event-stream"))),
        crate::http::schema::Refusals))]
pub(crate) async fn create_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateResponseBody>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    let model = body
        .model
        .unwrap_or_else(|| gateway.default_model().to_owned());
    if let Err(error) = check_model(&model) {
        return Ok(about("model", error));
    }
    let metadata = body.metadata.unwrap_or_default();
    if let Err(error) = check_metadata(&metadata) {
        return Ok(about("metadata", error));
    }
    if body.store == Some(false) {
        let error =
            ApiError::BadRequest("every response is a stored turn: store must be true".into());
        return Ok(about("store", error));
    }
    let (input, instructions) = match turn_input(body.input, body.instructions) {
        Ok(turn) => turn,
        Err(refusal) => return Ok(*refusal),
    };
    let key = checked_idempotency_key(&headers)?;
    let seed = key.as_deref().map(|k| format!("{user}\0{k}"));
    let session = match where_to_run(
        &gateway,
        &user,
        body.conversation,
        body.previous_response_id.as_deref(),
        seed.as_deref(),
    )
    .await
    {
        Ok(session) => session,
        Err(refusal) => return Ok(refusal),
    };
    let id = ResponseId::new(session.session_id(), seed.as_deref());
    let shape = Shape {
        id: id.to_string(),
        conversation: session.session_id().to_owned(),
        created_at: now_seconds(),
        model,
        previous: body.previous_response_id,
        instructions: instructions.clone(),
        metadata,
    };
    let tracked = Tracked::new(&gateway, &shape.id);
    let mut attributes = std::collections::HashMap::new();
    if let Some(instructions) = instructions {
        attributes.insert(
            INSTRUCTIONS_ATTRIBUTE.to_owned(),
            Value::String(instructions),
        );
    }
    let options = CallOptions::default()
        .with_request_id(id.turn.clone())
        .with_cancellation(tracked.running.cancel.clone())
        .with_attributes(Arc::new(attributes) as Attributes);
    let runtime = gateway.runtime();
    let timeout = gateway.config().request_timeout;
    if body.stream == Some(true) {
        let stream = runtime
            .call_streaming(&session, input, options)
            .await
            .map_err(|e| ApiError::from(e).of_turn())?;
        let started = Started {
            shape,
            tracked,
            store: runtime.store().clone(),
            key: session,
        };
        return Ok(response_events(started, stream, timeout));
    }
    let call = {
        let (runtime, session) = (runtime.clone(), session.clone());
        tokio::spawn(async move { runtime.call_with(&session, input, options).await })
    };
    let outcome = within(timeout, false, call)
        .await?
        .map_err(|e| ApiError::Internal(format!("the turn's task ended without an answer: {e}")))?
        .map_err(|e| ApiError::from(e).of_turn())?;
    let object = finished(
        &shape,
        runtime.store().as_ref(),
        &session,
        &outcome,
        tracked.cancelled(),
    )
    .await;
    Ok(Json(object).into_response())
}

/// The response object of a turn that ended with `outcome`.
pub(crate) async fn finished(
    shape: &Shape,
    store: &dyn Store,
    key: &SessionKey,
    outcome: &Outcome,
    cancelled: bool,
) -> Value {
    let (status, incomplete) = status_of(outcome.kind, cancelled);
    // The usage is on the output event; a store that does not answer only leaves it out.
    let usage = store
        .read_events(key, outcome.seq, 1)
        .await
        .ok()
        .and_then(|events| events.into_iter().next())
        .and_then(|event| match event.kind {
            EventKind::AgentOutput { usage, .. } => usage,
            _ => None,
        });
    let output = match outcome.kind {
        OutcomeKind::Superseded => Vec::new(),
        _ => vec![message(
            &format!("msg_{}", outcome.seq),
            &outcome.output,
            item_status(status),
        )],
    };
    let extra = Extra {
        usage: usage.map(|u| (u.input_tokens, u.output_tokens)),
        incomplete,
        error: None,
        seq: Some(outcome.seq),
    };
    shape.object(status, output, extra)
}

/// The session a response runs in: the named conversation, the previous response's (or a
/// fork of it taken after that response), or a new one. A refusal is the answer to send.
async fn where_to_run(
    gateway: &Gateway,
    user: &str,
    conversation: Option<ConversationRef>,
    previous: Option<&str>,
    seed: Option<&str>,
) -> Result<SessionKey, Response> {
    let store = gateway.runtime().store().as_ref();
    match (conversation, previous) {
        (Some(_), Some(_)) => Err(about(
            "previous_response_id",
            ApiError::BadRequest("give conversation or previous_response_id, not both".into()),
        )),
        (Some(ConversationRef::Id(id) | ConversationRef::Object { id }), None) => {
            let key = conversation_key(user, &id).map_err(|e| about("conversation", e))?;
            // A live session exists: only one that is not needs a store read to tell.
            if !gateway.runtime().is_live(&key) {
                last_seq(store, &key)
                    .await
                    .map_err(|e| about("conversation", e))?;
            }
            Ok(key)
        }
        (None, Some(previous)) => {
            let missing = || {
                about(
                    "previous_response_id",
                    ApiError::NotFound(format!("no response {previous}")),
                )
            };
            let id = ResponseId::parse(previous).ok_or_else(missing)?;
            let key = conversation_key(user, &id.conversation).map_err(|_| missing())?;
            let found = find(store, &key, &id.turn)
                .await
                .map_err(IntoResponse::into_response)?;
            let answer = found.and_then(|f| f.answer).ok_or_else(missing)?;
            let newest = last_seq(store, &key)
                .await
                .map_err(IntoResponse::into_response)?;
            let later = super::items::items_forward(store, &key, answer.seq + 1, 1)
                .await
                .map_err(IntoResponse::into_response)?;
            if later.is_empty() && newest >= answer.seq {
                return Ok(key);
            }
            // Not the newest: continue in a copy of the conversation up to that response.
            let fork = conversation_key(
                user,
                &new_id(
                    "conv_",
                    seed.map(|s| format!("fork\0{previous}\0{s}")).as_deref(),
                ),
            )
            .map_err(IntoResponse::into_response)?;
            match gateway.runtime().fork(&key, &fork, Some(answer.seq)).await {
                Ok(_) => Ok(fork),
                // A retry (same key) finds the fork its first attempt made.
                Err(Error::AlreadyExists { .. }) if seed.is_some() => Ok(fork),
                Err(e) => Err(ApiError::from(e).into_response()),
            }
        }
        (None, None) => {
            let id = new_id("conv_", seed);
            conversation_key(user, &id).map_err(IntoResponse::into_response)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::InterruptReason;

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
    fn input_messages_split_into_the_turn_and_its_instructions() {
        let items: Vec<InputItem> = serde_json::from_value(json!([
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ]))
        .unwrap();
        let (input, told) = turn_input(Input::Items(items), Some("first".into())).unwrap();
        assert_eq!(input, "hi");
        assert_eq!(told.as_deref(), Some("first\n\nbe brief"));
        let assistant: Vec<InputItem> =
            serde_json::from_value(json!([{"role": "assistant", "content": "x"}])).unwrap();
        assert!(turn_input(Input::Items(assistant), None).is_err());
    }
}
