//! `/v1/responses`: one response is one turn of the conversation's session — same FIFO,
//! overlap policy, idempotency and durability as `POST …/turns` — and it is read back from the
//! session's log, where its input carries the response's turn id as its request id.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::items::{item_of, last_seq, InputItem, ItemList};
use super::stream::{response_events, Started};
use super::{
    about, acting_user, check_metadata, check_model, conversation_key, new_id, now_seconds,
    seconds, Metadata, ResponseId, MAX_ITEMS,
};
use crate::call::{Attributes, CallOptions, Outcome, OutcomeKind};
use crate::error::Error;
use crate::http::answer::{checked_idempotency_key, within};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::gateway::{Gateway, Running};
use crate::key::SessionKey;
use crate::state::{Event, EventKind, OutputStatus, Seq};
use crate::store::Store;

/// Events read at a time while looking for a response in its conversation's log.
const READ_CHUNK: usize = 200;

/// How far back from a conversation's newest event a response is looked for: older ones are
/// answered 404 rather than reading a long log whole.
const MAX_SCAN: Seq = 20_000;

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

/// What a response object says besides its output.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub id: String,
    pub conversation: String,
    pub created_at: u64,
    pub model: String,
    pub previous: Option<String>,
    pub instructions: Option<String>,
    pub metadata: Metadata,
}

impl Shape {
    /// The response object with `status` and `output` (message items), `usage` and more.
    pub(crate) fn object(&self, status: &str, output: Vec<Value>, extra: Extra) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": extra.usage.map(|(input, output)| json!({
                "input_tokens": input,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input + output,
            })),
            "conversation": {"id": self.conversation},
            "previous_response_id": self.previous,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "error": extra.error,
            "incomplete_details": extra.incomplete.map(|reason| json!({"reason": reason})),
            "parallel_tool_calls": false,
            "tool_choice": "auto",
            "tools": [],
            "temperature": null,
            "top_p": null,
            "store": true,
            "background": false,
            "text": {"format": {"type": "text"}},
        })
    }
}

/// A response object's optional parts.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// Input and output tokens.
    pub usage: Option<(u64, u64)>,
    /// `{"code", "message"}` of a failed response.
    pub error: Option<Value>,
    /// Why a response is incomplete.
    pub incomplete: Option<String>,
}

/// The status of a response whose turn ended with `kind`, and why it is incomplete.
pub(crate) fn status_of(kind: OutcomeKind, cancelled: bool) -> (&'static str, Option<String>) {
    match kind {
        OutcomeKind::Completed | OutcomeKind::Merged => ("completed", None),
        OutcomeKind::Interrupted(_) if cancelled => ("cancelled", None),
        OutcomeKind::Interrupted(reason) => ("incomplete", Some(reason_name(reason))),
        OutcomeKind::Superseded => ("incomplete", Some("superseded".into())),
    }
}

fn reason_name(reason: crate::state::InterruptReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "interrupted".into())
}

/// The assistant message item of a response's output.
pub(crate) fn message(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
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
    };
    shape.object(status, output, extra)
}

fn item_status(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        _ => "incomplete",
    }
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
            last_seq(store, &key)
                .await
                .map_err(|e| about("conversation", e))?;
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

/// A response found in its conversation's log.
pub(crate) struct Found {
    /// Its input.
    pub input: Event,
    /// What answered it: the turn's output or failure, if it is stored yet.
    pub answer: Option<Event>,
}

/// Looks for the turn whose input carries `turn` as its request id, from the newest event
/// back (at most [`MAX_SCAN`] events).
pub(crate) async fn find(
    store: &dyn Store,
    key: &SessionKey,
    turn: &str,
) -> Result<Option<Found>, ApiError> {
    let store_error = |err| ApiError::from(Error::store(key, err));
    let Ok(last) = last_seq(store, key).await else {
        return Ok(None);
    };
    let mut end = last;
    let mut input = None;
    while input.is_none() && end > 0 && last - end < MAX_SCAN {
        let from = end.saturating_sub(READ_CHUNK as Seq - 1).max(1);
        let events = store
            .read_events(key, from, (end - from + 1) as usize)
            .await
            .map_err(store_error)?;
        input = events.into_iter().rev().find(|event| {
            matches!(event.kind, EventKind::UserInput { .. })
                && event.request_id.as_deref() == Some(turn)
        });
        end = from - 1;
    }
    let Some(input) = input else { return Ok(None) };
    // The answer follows its input, after the turn's tool events.
    let mut next = input.seq + 1;
    loop {
        let events = store
            .read_events(key, next, READ_CHUNK)
            .await
            .map_err(store_error)?;
        let Some(last) = events.last() else {
            return Ok(Some(Found {
                input,
                answer: None,
            }));
        };
        next = last.seq + 1;
        let answer = events.into_iter().find(|event| {
            matches!(
                event.kind,
                EventKind::AgentOutput { .. }
                    | EventKind::TurnFailed { .. }
                    | EventKind::UserInput { .. }
            )
        });
        if let Some(answer) = answer {
            let answer = (!matches!(answer.kind, EventKind::UserInput { .. })).then_some(answer);
            return Ok(Some(Found { input, answer }));
        }
    }
}

/// The response object of a stored turn.
fn stored(shape: &Shape, found: &Found) -> Value {
    let Some(answer) = &found.answer else {
        return shape.object("in_progress", Vec::new(), Extra::default());
    };
    let id = format!("msg_{}", answer.seq);
    match &answer.kind {
        EventKind::AgentOutput {
            text,
            status,
            usage,
            ..
        } => {
            let (status, incomplete) = match status {
                OutputStatus::Final => ("completed", None),
                OutputStatus::Interrupted(reason) => ("incomplete", Some(reason_name(*reason))),
            };
            let extra = Extra {
                usage: usage.as_ref().map(|u| (u.input_tokens, u.output_tokens)),
                incomplete,
                error: None,
            };
            shape.object(status, vec![message(&id, text, item_status(status))], extra)
        }
        EventKind::TurnFailed { code, reason, .. } => {
            let extra = Extra {
                error: Some(json!({"code": code, "message": reason})),
                ..Extra::default()
            };
            shape.object("failed", Vec::new(), extra)
        }
        _ => shape.object("in_progress", Vec::new(), Extra::default()),
    }
}

/// Reads the response `id` as the caller may see it.
async fn lookup(
    gateway: &Gateway,
    caller: &Caller,
    headers: &HeaderMap,
    id: &str,
) -> Result<(Shape, Option<Found>), ApiError> {
    let missing = || ApiError::NotFound(format!("no response {id}"));
    let parsed = ResponseId::parse(id).ok_or_else(missing)?;
    let key = conversation_key(&acting_user(caller, headers)?, &parsed.conversation)
        .map_err(|_| missing())?;
    let found = find(gateway.runtime().store().as_ref(), &key, &parsed.turn).await?;
    let running = gateway.responses().lock().contains_key(id);
    if found.is_none() && !running {
        return Err(missing());
    }
    let created_at = found
        .as_ref()
        .map_or_else(now_seconds, |f| seconds(f.input.at_ms));
    let shape = Shape {
        id: id.to_owned(),
        conversation: parsed.conversation,
        created_at,
        model: gateway.default_model().to_owned(),
        previous: None,
        instructions: None,
        metadata: Metadata::new(),
    };
    Ok((shape, found))
}

/// The response, from its conversation's log (`in_progress` while its turn runs here).
#[utoipa::path(get, path = "/v1/responses/{response}", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), crate::http::schema::Refusals))]
pub(crate) async fn get_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let (shape, found) = lookup(&gateway, &caller, &headers, &id).await?;
    Ok(Json(match found {
        Some(found) => stored(&shape, &found),
        None => shape.object("in_progress", Vec::new(), Extra::default()),
    }))
}

/// Interrupts the response's turn, if it runs here; answers the response once its turn is
/// recorded (with the partial output), or as it is when the wait ends first.
#[utoipa::path(post, path = "/v1/responses/{response}/cancel", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), crate::http::schema::Refusals))]
pub(crate) async fn cancel_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    // Checked first: a token must not cancel a response it cannot read.
    lookup(&gateway, &caller, &headers, &id).await?;
    let running = gateway.responses().lock().get(&id).cloned();
    if let Some(running) = &running {
        running.cancel.cancel();
        let _ = tokio::time::timeout(
            gateway.config().request_timeout,
            running.finished.cancelled(),
        )
        .await;
    }
    let (shape, found) = lookup(&gateway, &caller, &headers, &id).await?;
    let mut object = match found {
        Some(found) => stored(&shape, &found),
        None => shape.object("in_progress", Vec::new(), Extra::default()),
    };
    if running.is_some() && object["status"] == "incomplete" {
        object["status"] = json!("cancelled");
        object["incomplete_details"] = Value::Null;
    }
    Ok(Json(object))
}

/// The response's input, as items.
#[utoipa::path(get, path = "/v1/responses/{response}/input_items", tag = "openai",
    params(ResponsePath), responses((status = 200, body = ItemList), crate::http::schema::Refusals))]
pub(crate) async fn response_input_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ItemList>, ApiError> {
    let (_, found) = lookup(&gateway, &caller, &headers, &id).await?;
    let items: Vec<Value> = found.iter().filter_map(|f| item_of(&f.input)).collect();
    let count = items.len().max(1);
    Ok(Json(ItemList::of(items, count)))
}

#[cfg(test)]
mod tests {
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
