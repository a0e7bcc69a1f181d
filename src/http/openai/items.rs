//! `/v1/conversations/{conversation}/items`: a conversation's log as items, and the items a
//! client adds to it ([`crate::responses`] decides; these handlers read and format).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::conversations::ConversationPath;
use super::{about, acting_user, refusal};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::gateway::Gateway;
use crate::http::schema::Refusals;
use crate::responses::{InputItem, ItemOrder, ItemPage};

/// Items per page unless `limit` says otherwise (OpenAI's default).
const DEFAULT_LIMIT: usize = 20;

/// `POST …/items`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddBody {
    /// Up to 20 user or assistant messages, function calls or their outputs.
    items: Vec<InputItem>,
}

/// `GET …/items`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Items per page, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<usize>,
    /// The id of the item the page starts after.
    after: Option<String>,
    /// `asc` or `desc` (the default: newest first).
    order: Option<String>,
    /// Refused unless empty: items carry everything they have.
    #[serde(default)]
    include: Option<String>,
}

/// An item's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ItemPath {
    /// The conversation's id.
    #[param(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    conversation: String,
    /// The item's id (`msg_7`).
    item: String,
}

/// The conversation's items, a page at a time, read from the store.
#[utoipa::path(get, path = "/v1/conversations/{conversation}/items", tag = "openai",
    params(ConversationPath, ListQuery), responses((status = 200, body = ItemPage), Refusals))]
pub(crate) async fn list_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    if query.include.as_deref().is_some_and(|i| !i.is_empty()) {
        let error = ApiError::BadRequest(
            "include is not supported: items carry everything they have".into(),
        );
        return Ok(about("include", error));
    }
    let order = match query.order.as_deref().unwrap_or("desc") {
        "asc" => ItemOrder::Asc,
        "desc" => ItemOrder::Desc,
        _ => {
            let error = ApiError::BadRequest("order must be `asc` or `desc`".into());
            return Ok(about("order", error));
        }
    };
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let page = gateway
        .responses()
        .items(&user, &conversation, limit, query.after.as_deref(), order)
        .await;
    Ok(match page {
        Ok(page) => Json(page).into_response(),
        Err(error) => refusal(error),
    })
}

/// Adds items to the conversation without running a turn: the next response sees them.
#[utoipa::path(post, path = "/v1/conversations/{conversation}/items", tag = "openai",
    params(ConversationPath), request_body = AddBody,
    responses((status = 200, body = ItemPage), Refusals))]
pub(crate) async fn add_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
    ApiJson(body): ApiJson<AddBody>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    let added = gateway
        .responses()
        .add_items(&user, &conversation, &body.items)
        .await;
    Ok(match added {
        Ok(items) => {
            let count = items.len().max(1);
            Json(ItemPage::of(items, count)).into_response()
        }
        Err(error) => refusal(error),
    })
}

/// One item.
#[utoipa::path(get, path = "/v1/conversations/{conversation}/items/{item}", tag = "openai",
    params(ItemPath), responses((status = 200, body = Object), Refusals))]
pub(crate) async fn get_item(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath((conversation, item)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    Ok(
        match gateway.responses().item(&user, &conversation, &item).await {
            Ok(item) => Json(item).into_response(),
            Err(error) => refusal(error),
        },
    )
}

/// Refused: a conversation's items are its session's log, which only grows.
#[utoipa::path(delete, path = "/v1/conversations/{conversation}/items/{item}", tag = "openai",
    params(ItemPath), responses((status = 409, description = "`append_only`: never deleted",
        body = crate::http::error::ErrorBody), Refusals))]
pub(crate) async fn delete_item(
    caller: Caller,
    headers: HeaderMap,
    ApiPath((conversation, _item)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    crate::responses::conversation_key(&user, &conversation).map_err(|e| match e {
        crate::responses::ResponsesError::NotFound { message, .. } => ApiError::NotFound(message),
        other => ApiError::BadRequest(other.to_string()),
    })?;
    Err(ApiError::AppendOnly(
        "a conversation's items are its session's log, which only grows: an item cannot be \
         deleted. Delete the conversation, or fork its session before the item \
         (POST /v1/sessions/{user}/{session}/fork with at_seq)"
            .into(),
    ))
}
