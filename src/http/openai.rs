//! OpenAI's API as a second front door on the same sessions (`docs/openai-api.md`): a
//! conversation is a session, a response is a turn, cancel is interrupt; chat completions for
//! the clients that speak only that; the models `serve` was started with.
//!
//! Who owns a conversation: a user token's own user; an admin token (or an open gateway) acts
//! for the user named in [`USER_HEADER`], [`DEFAULT_USER`] when it names none. A conversation
//! id is the session id under that user, so a token never reaches another user's conversation:
//! it names a session of its own user, which does not exist (404).
//!
//! Errors on these routes are re-shaped by [`openai_errors`] into OpenAI's
//! `{"error": {"message", "type", "param", "code"}}`, with the statuses and headers of the
//! other routes.

pub(super) mod chat;
pub(super) mod conversations;
pub(super) mod items;
pub(super) mod responses;
pub(super) mod routing;
mod stream;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::ApiError;
use super::gateway::Gateway;
use crate::key::{validate_id, KeyPart};
use crate::responses::ResponsesError;
pub use crate::responses::{
    DEFAULT_USER, MAX_CONVERSATION_ID_BYTES, MAX_ITEMS, MAX_LIST_LIMIT, MAX_METADATA_KEY_BYTES,
    MAX_METADATA_PAIRS, MAX_METADATA_VALUE_BYTES,
};

/// The header an admin token names the conversation's user with.
pub const USER_HEADER: &str = "x-turnstile-user";

/// The header that binds a chat completion to a session of the caller's user.
pub const SESSION_HEADER: &str = "x-session-id";

/// The OpenAI routes, each timed as the router says (responses and chat completions time
/// themselves, like turns).
pub(crate) fn routes(gateway: &Gateway) -> (Router<Gateway>, Router<Gateway>) {
    let mut turns = Router::new()
        .route("/v1/responses", post(responses::create_response))
        .route("/v1/chat/completions", post(chat::chat_completions));
    let mut quick = Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/models/{model}", get(get_model))
        .route(
            "/v1/conversations",
            post(conversations::create_conversation),
        )
        .route(
            "/v1/conversations/{conversation}",
            get(conversations::get_conversation)
                .post(conversations::update_conversation)
                .delete(conversations::delete_conversation),
        )
        .route(
            "/v1/conversations/{conversation}/items",
            get(items::list_items).post(items::add_items),
        )
        .route(
            "/v1/conversations/{conversation}/items/{item}",
            get(items::get_item).delete(items::delete_item),
        )
        .route("/v1/responses/{response}", get(responses::get_response))
        .route(
            "/v1/responses/{response}/cancel",
            post(responses::cancel_response),
        )
        .route(
            "/v1/responses/{response}/input_items",
            get(responses::response_input_items),
        );
    if gateway.config().forward {
        // Sent to the conversation's owner before anything runs; its errors are shaped there.
        let by_conversation =
            axum::middleware::from_fn_with_state(gateway.clone(), routing::openai_route);
        turns = turns.route_layer(by_conversation.clone());
        quick = quick.route_layer(by_conversation);
    }
    let shape = axum::middleware::from_fn_with_state(gateway.clone(), openai_errors);
    (turns.route_layer(shape.clone()), quick.route_layer(shape))
}

/// The user a request acts for: see the module's documentation.
pub(crate) fn acting_user(caller: &Caller, headers: &HeaderMap) -> Result<String, ApiError> {
    let named = match headers.get(USER_HEADER) {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::BadRequest(format!("{USER_HEADER} must be ASCII")))?
                .to_owned(),
        ),
        None => None,
    };
    let user = match (caller, named) {
        (Caller::User { id, .. }, Some(named)) if *id != named => {
            return Err(ApiError::Forbidden(format!(
                "a user token acts for its own user; only an admin token may name one in \
                 {USER_HEADER}"
            )))
        }
        (Caller::User { id, .. }, _) => id.clone(),
        (_, Some(named)) => named,
        (_, None) => DEFAULT_USER.to_owned(),
    };
    validate_id(&user, KeyPart::User)?;
    Ok(user)
}

/// The `type` of an OpenAI error body, from its status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// The parameter an error concerns, attached by a handler to its error response.
#[derive(Debug, Clone)]
pub(crate) struct Param(pub String);

/// An [`ApiError`] about the request field `param`.
pub(crate) fn about(param: &str, error: ApiError) -> Response {
    let mut response = error.into_response();
    response.extensions_mut().insert(Param(param.to_owned()));
    response
}

/// The answer to a refusal of the library's OpenAI rules: its status, and the field it names.
/// A failed turn is answered as a turn's (saying whether the session kept it).
pub(crate) fn refusal(error: ResponsesError) -> Response {
    match error {
        ResponsesError::Invalid { param, message } => about(&param, ApiError::BadRequest(message)),
        ResponsesError::NotFound {
            param: Some(param),
            message,
        } => about(&param, ApiError::NotFound(message)),
        ResponsesError::NotFound { message, .. } => ApiError::NotFound(message).into_response(),
        ResponsesError::Runtime(error) => ApiError::from(error).of_turn().into_response(),
        ResponsesError::Internal(detail) => ApiError::Internal(detail).into_response(),
    }
}

/// Largest error body re-shaped (they are small JSON objects); a larger one is left alone.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Re-shapes every error answer of the OpenAI routes, `{"error": {"code", "message", …}}`,
/// into OpenAI's `{"error": {"message", "type", "param", "code", …}}`; statuses and headers
/// (`Retry-After`) stay.
pub(crate) async fn openai_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if !response.status().is_client_error() && !response.status().is_server_error() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return (parts.status, "").into_response();
    };
    let Ok(Value::Object(mut outer)) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let param = parts.extensions.get::<Param>().map(|p| p.0.clone());
    if let Some(Value::Object(error)) = outer.get_mut("error") {
        if error.contains_key("type") {
            // Shaped already: by the owner this request was forwarded to.
            return Response::from_parts(parts, Body::from(bytes));
        }
        // An upstream rate limit is OpenAI's own 429, so that its SDKs back off
        // (`RateLimitError`) after `Retry-After` instead of failing on a 503.
        if error.get("code").and_then(Value::as_str) == Some("model_rate_limited") {
            parts.status = StatusCode::TOO_MANY_REQUESTS;
        }
        error.insert("type".into(), json!(error_type(parts.status)));
        error.insert("param".into(), json!(param));
    }
    let shaped = serde_json::to_vec(&outer).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(shaped))
}

/// One model.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Model {
    id: String,
    /// Always `model`.
    object: &'static str,
    /// Always 0: models come with the process.
    created: u64,
    /// Always `turnstile`.
    owned_by: &'static str,
}

impl Model {
    fn named(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            object: "model",
            created: 0,
            owned_by: "turnstile",
        }
    }
}

/// The models list.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ModelList {
    /// Always `list`.
    object: &'static str,
    data: Vec<Model>,
}

/// The models this process was started with (`--model`, or its built-in agent's name).
#[utoipa::path(get, path = "/v1/models", tag = "openai",
    responses((status = 200, body = ModelList), super::schema::Refusals))]
pub(crate) async fn list_models(
    State(gateway): State<Gateway>,
    _caller: Caller,
) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: gateway.models().iter().map(|m| Model::named(m)).collect(),
    })
}

/// The model path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ModelPath {
    /// A model's id.
    model: String,
}

/// One model this process was started with.
#[utoipa::path(get, path = "/v1/models/{model}", tag = "openai", params(ModelPath),
    responses((status = 200, body = Model), super::schema::Refusals))]
pub(crate) async fn get_model(
    State(gateway): State<Gateway>,
    _caller: Caller,
    super::extract::ApiPath(model): super::extract::ApiPath<String>,
) -> Result<Json<Model>, ApiError> {
    gateway
        .models()
        .iter()
        .find(|m| **m == model)
        .map(|m| Json(Model::named(m)))
        .ok_or_else(|| ApiError::NotFound(format!("no model {model:?} here")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_act_for_themselves_and_admins_for_whom_they_name() {
        let alice = Caller::User {
            id: "alice".into(),
            channels: vec![],
        };
        let mut headers = HeaderMap::new();
        assert_eq!(acting_user(&alice, &headers).unwrap(), "alice");
        assert_eq!(acting_user(&Caller::Admin, &headers).unwrap(), DEFAULT_USER);
        headers.insert(USER_HEADER, HeaderValue::from_static("bob"));
        assert!(acting_user(&alice, &headers).is_err());
        assert_eq!(acting_user(&Caller::Admin, &headers).unwrap(), "bob");
    }

    #[test]
    fn error_types_follow_the_status() {
        assert_eq!(error_type(StatusCode::BAD_REQUEST), "invalid_request_error");
        assert_eq!(error_type(StatusCode::UNAUTHORIZED), "authentication_error");
        assert_eq!(error_type(StatusCode::NOT_FOUND), "not_found_error");
        assert_eq!(
            error_type(StatusCode::TOO_MANY_REQUESTS),
            "rate_limit_error"
        );
        assert_eq!(error_type(StatusCode::SERVICE_UNAVAILABLE), "server_error");
    }
}
