//! `/v1/conversations` and `/v1/conversations/{conversation}`: a conversation is a session of
//! the acting user ([`crate::responses`] decides; these handlers read and format).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{acting_user, refusal};
use crate::http::answer::checked_idempotency_key;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath, OptionalJson};
use crate::http::gateway::Gateway;
use crate::http::schema::Refusals;
use crate::responses::{Conversation, InputItem, Metadata};

/// `POST /v1/conversations`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateConversationBody {
    /// Up to 20 items to start with.
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
    let key = checked_idempotency_key(&headers)?;
    let items = body.items.unwrap_or_default();
    let metadata = body.metadata.unwrap_or_default();
    let created = gateway
        .responses()
        .create_conversation(&user, &items, metadata, key.as_deref())
        .await;
    Ok(answer(created))
}

fn answer(result: Result<Conversation, crate::responses::ResponsesError>) -> Response {
    match result {
        Ok(conversation) => Json(conversation).into_response(),
        Err(error) => refusal(error),
    }
}

/// The conversation.
#[utoipa::path(get, path = "/v1/conversations/{conversation}", tag = "openai",
    params(ConversationPath), responses((status = 200, body = Conversation), Refusals))]
pub(crate) async fn get_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    Ok(answer(
        gateway.responses().conversation(&user, &conversation).await,
    ))
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
    let user = acting_user(&caller, &headers)?;
    let updated = gateway
        .responses()
        .update_conversation(&user, &conversation, body.metadata)
        .await;
    Ok(answer(updated))
}

/// Deletes the conversation: the session, its history and state.
#[utoipa::path(delete, path = "/v1/conversations/{conversation}", tag = "openai",
    params(ConversationPath), responses((status = 200, body = ConversationDeleted), Refusals))]
pub(crate) async fn delete_conversation(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    Ok(
        match gateway
            .responses()
            .delete_conversation(&user, &conversation)
            .await
        {
            Ok(()) => Json(ConversationDeleted {
                id: conversation,
                object: "conversation.deleted",
                deleted: true,
            })
            .into_response(),
            Err(error) => refusal(error),
        },
    )
}
