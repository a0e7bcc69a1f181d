//! `/v1/conversations` and `/v1/conversations/{conversation}`: a conversation is a session of
//! the acting user; its metadata is the session-state key [`METADATA_KEY`].

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::items::{entries_of, InputItem};
use super::{
    about, acting_user, check_metadata, conversation_key, new_id, seconds, Metadata, MAX_ITEMS,
    METADATA_KEY,
};
use crate::call::Entry;
use crate::http::answer::checked_idempotency_key;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath, OptionalJson};
use crate::http::gateway::Gateway;
use crate::http::schema::Refusals;
use crate::key::SessionKey;
use crate::runtime::Runtime;
use crate::state::StateDelta;

/// `POST /v1/conversations`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateConversationBody {
    /// Up to 20 messages to start with.
    #[serde(default)]
    items: Option<Vec<InputItem>>,
    /// Up to 16 string pairs (keys ≤ 64 bytes, values ≤ 512).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    metadata: Option<Metadata>,
}

/// `POST /v1/conversations/{conversation}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBody {
    /// The new metadata, replacing the old.
    #[schema(value_type = Object)]
    metadata: Metadata,
}

/// A conversation.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Conversation {
    /// The session id under the acting user.
    id: String,
    /// Always `conversation`.
    object: &'static str,
    /// Seconds since the Unix epoch.
    created_at: u64,
    #[schema(value_type = Object)]
    metadata: Metadata,
}

/// A deleted conversation.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ConversationDeleted {
    id: String,
    /// Always `conversation.deleted`.
    object: &'static str,
    deleted: bool,
}

/// A conversation's path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ConversationPath {
    /// The conversation's id: 1–64 letters, digits, `_` or `-`.
    #[param(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    conversation: String,
}

/// The note that opens every conversation: a session exists once its log has an event.
const CREATED_NOTE: &str = "conversation created through the OpenAI API";

/// The conversation as stored, or a 404.
pub(crate) async fn read(runtime: &Runtime, key: &SessionKey) -> Result<Conversation, ApiError> {
    let view = runtime
        .state(key)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {}", key.session_id())))?;
    let metadata = view
        .record
        .state
        .get(METADATA_KEY)
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default();
    Ok(Conversation {
        id: key.session_id().to_owned(),
        object: "conversation",
        created_at: seconds(view.record.created_ms),
        metadata,
    })
}

/// Creates a conversation (a session) with optional items and metadata; with an
/// `Idempotency-Key`, a retry gets the conversation the first attempt made.
#[utoipa::path(post, path = "/v1/conversations", tag = "openai",
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$",
        description = "A retry with the same key gets the same conversation")),
    request_body = Option<CreateConversationBody>, responses((status = 200, body = Conversation), Refusals))]
pub(crate) async fn create_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    OptionalJson(body): OptionalJson<CreateConversationBody>,
) -> Result<Response, ApiError> {
    let body = body.unwrap_or_default();
    let user = acting_user(&caller, &headers)?;
    let seed = checked_idempotency_key(&headers)?.map(|key| format!("{user}\0{key}"));
    let key = conversation_key(&user, &new_id("conv_", seed.as_deref()))?;
    let metadata = body.metadata.unwrap_or_default();
    if let Err(error) = check_metadata(&metadata) {
        return Ok(about("metadata", error));
    }
    let items = body.items.unwrap_or_default();
    if items.len() > MAX_ITEMS {
        let error = ApiError::BadRequest(format!("at most {MAX_ITEMS} items at a time"));
        return Ok(about("items", error));
    }
    // Checked before a retry is looked up: a request the route refuses is refused whatever
    // an earlier one with the same key created.
    let mut entries = vec![Entry::Note(CREATED_NOTE.into())];
    match entries_of(items) {
        Ok(more) => entries.extend(more),
        Err(error) => return Ok(about("items", error)),
    }
    let runtime = gateway.runtime();
    // A retry of a creation that was stored answers what was stored.
    if seed.is_some() {
        if let Ok(existing) = read(runtime, &key).await {
            return Ok(Json(existing).into_response());
        }
    }
    let state = StateDelta::from([(METADATA_KEY.to_owned(), json!(metadata))]);
    runtime.append(&key, entries, state).await?;
    Ok(Json(read(runtime, &key).await?).into_response())
}

/// The conversation.
#[utoipa::path(get, path = "/v1/conversations/{conversation}", tag = "openai",
    params(ConversationPath), responses((status = 200, body = Conversation), Refusals))]
pub(crate) async fn get_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Json<Conversation>, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    Ok(Json(read(gateway.runtime(), &key).await?))
}

/// Replaces the conversation's metadata.
#[utoipa::path(post, path = "/v1/conversations/{conversation}", tag = "openai",
    params(ConversationPath), request_body = UpdateBody,
    responses((status = 200, body = Conversation), Refusals))]
pub(crate) async fn update_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateBody>,
) -> Result<Response, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    if let Err(error) = check_metadata(&body.metadata) {
        return Ok(about("metadata", error));
    }
    let runtime = gateway.runtime();
    // Appending creates a session: only an existing one is updated.
    read(runtime, &key).await?;
    let state = StateDelta::from([(METADATA_KEY.to_owned(), json!(body.metadata))]);
    runtime.append(&key, Vec::new(), state).await?;
    Ok(Json(read(runtime, &key).await?).into_response())
}

/// Deletes the conversation: the session, its history and state.
#[utoipa::path(delete, path = "/v1/conversations/{conversation}", tag = "openai",
    params(ConversationPath), responses((status = 200, body = ConversationDeleted), Refusals))]
pub(crate) async fn delete_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Json<ConversationDeleted>, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    if !gateway.runtime().delete(&key).await? {
        return Err(ApiError::NotFound(format!(
            "no conversation {conversation}"
        )));
    }
    Ok(Json(ConversationDeleted {
        id: conversation,
        object: "conversation.deleted",
        deleted: true,
    }))
}
