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

pub use responses::INSTRUCTIONS_ATTRIBUTE;

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::ApiError;
use super::gateway::Gateway;
use crate::key::{validate_id, KeyPart, SessionKey};

/// The header an admin token names the conversation's user with.
pub const USER_HEADER: &str = "x-turnstile-user";

/// The header that binds a chat completion to a session of the caller's user.
pub const SESSION_HEADER: &str = "x-session-id";

/// The user an admin token (or an open gateway) acts for when [`USER_HEADER`] names none.
pub const DEFAULT_USER: &str = "openai";

/// Most metadata pairs on a conversation or a response: OpenAI's own bound.
pub const MAX_METADATA_PAIRS: usize = 16;

/// Longest metadata key, in bytes (OpenAI's bound).
pub const MAX_METADATA_KEY_BYTES: usize = 64;

/// Longest metadata value, in bytes (OpenAI's bound).
pub const MAX_METADATA_VALUE_BYTES: usize = 512;

/// Most items one request may add (a conversation's creation, `POST …/items`, a response's
/// `input`, a chat completion's `messages`): OpenAI's bound on adding items.
pub const MAX_ITEMS: usize = 20;

/// Most items a listing returns per page (OpenAI's bound).
pub const MAX_LIST_LIMIT: usize = 100;

/// Longest conversation id a client may name: ids are session ids of this alphabet, so that a
/// response id can carry its conversation's.
pub const MAX_CONVERSATION_ID_BYTES: usize = 64;

/// Longest `model` or `instructions` string kept, in bytes.
const MAX_MODEL_BYTES: usize = 256;

/// The session-state key a conversation's metadata is kept under.
pub(crate) const METADATA_KEY: &str = "openai.metadata";

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
        .route(
            "/v1/responses/{response}",
            get(responses::reading::get_response),
        )
        .route(
            "/v1/responses/{response}/cancel",
            post(responses::reading::cancel_response),
        )
        .route(
            "/v1/responses/{response}/input_items",
            get(responses::reading::response_input_items),
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

/// The session of `conversation` under `user`, once the id is checked.
pub(crate) fn conversation_key(user: &str, conversation: &str) -> Result<SessionKey, ApiError> {
    check_conversation_id(conversation)?;
    Ok(SessionKey::new(user, conversation)?)
}

/// A conversation id: 1 to [`MAX_CONVERSATION_ID_BYTES`] letters, digits, `_` or `-`.
pub(crate) fn check_conversation_id(id: &str) -> Result<(), ApiError> {
    let fits = !id.is_empty()
        && id.len() <= MAX_CONVERSATION_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return Ok(());
    }
    Err(ApiError::NotFound(format!(
        "no conversation {id:?}: conversation ids are 1 to {MAX_CONVERSATION_ID_BYTES} letters, \
         digits, `_` or `-`"
    )))
}

/// A fresh id: `prefix` and 32 hex digits, random, or derived from `seed` (an
/// `Idempotency-Key`, so that a retry names what the first attempt made).
pub(crate) fn new_id(prefix: &str, seed: Option<&str>) -> String {
    match seed {
        Some(seed) => {
            let digest = Sha256::digest(format!("{prefix}\0{seed}").as_bytes());
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("{prefix}{hex}")
        }
        None => format!("{prefix}{}", uuid::Uuid::new_v4().simple()),
    }
}

/// A response's id, `resp_<32 hex>_<conversation>`: it names the turn (the hex part, the
/// turn's request id) and the session it ran in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseId {
    /// `resp_<32 hex>`: the request id of the turn's input.
    pub turn: String,
    /// The conversation (session id) it ran in.
    pub conversation: String,
}

impl ResponseId {
    const PREFIX: &'static str = "resp_";
    const HEX: usize = 32;

    pub(crate) fn new(conversation: &str, seed: Option<&str>) -> Self {
        Self {
            turn: new_id(
                Self::PREFIX,
                seed.map(|s| format!("{conversation}\0{s}")).as_deref(),
            ),
            conversation: conversation.to_owned(),
        }
    }

    /// Reads an id; `None` when it is not one this gateway made.
    pub(crate) fn parse(id: &str) -> Option<Self> {
        let hex = id.strip_prefix(Self::PREFIX)?;
        let (turn, rest) = hex.split_at_checked(Self::HEX)?;
        let conversation = rest.strip_prefix('_')?;
        let ok = turn.bytes().all(|b| b.is_ascii_hexdigit())
            && check_conversation_id(conversation).is_ok();
        ok.then(|| Self {
            turn: format!("{}{turn}", Self::PREFIX),
            conversation: conversation.to_owned(),
        })
    }
}

impl std::fmt::Display for ResponseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}_{}", self.turn, self.conversation)
    }
}

/// Metadata: at most [`MAX_METADATA_PAIRS`] string pairs within their byte bounds.
pub(crate) type Metadata = BTreeMap<String, String>;

/// Checks metadata against its bounds.
pub(crate) fn check_metadata(metadata: &Metadata) -> Result<(), ApiError> {
    if metadata.len() > MAX_METADATA_PAIRS {
        return Err(ApiError::BadRequest(format!(
            "metadata holds {} pairs; at most {MAX_METADATA_PAIRS} are allowed",
            metadata.len()
        )));
    }
    for (key, value) in metadata {
        if key.is_empty() || key.len() > MAX_METADATA_KEY_BYTES {
            return Err(ApiError::BadRequest(format!(
                "metadata keys are 1 to {MAX_METADATA_KEY_BYTES} bytes"
            )));
        }
        if value.len() > MAX_METADATA_VALUE_BYTES {
            return Err(ApiError::BadRequest(format!(
                "metadata values are at most {MAX_METADATA_VALUE_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

/// Checks a `model` field's length; any name is accepted (the session's agent answers).
pub(crate) fn check_model(model: &str) -> Result<(), ApiError> {
    if model.len() > MAX_MODEL_BYTES {
        return Err(ApiError::BadRequest(format!(
            "model is at most {MAX_MODEL_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Seconds since the Unix epoch, from milliseconds: OpenAI's `created_at`.
pub(crate) fn seconds(ms: u64) -> u64 {
    ms / 1000
}

/// Now, in seconds since the Unix epoch.
pub(crate) fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
#[derive(Debug, Clone, Copy)]
pub(crate) struct Param(pub &'static str);

/// An [`ApiError`] about the request field `param`.
pub(crate) fn about(param: &'static str, error: ApiError) -> Response {
    let mut response = error.into_response();
    response.extensions_mut().insert(Param(param));
    response
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
    let param = parts.extensions.get::<Param>().map(|p| p.0);
    if let Some(Value::Object(error)) = outer.get_mut("error") {
        if error.contains_key("type") {
            // Shaped already: by the owner this request was forwarded to.
            return Response::from_parts(parts, Body::from(bytes));
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
    fn response_ids_round_trip_and_refuse_foreign_ones() {
        let id = ResponseId::new("conv_abc", None);
        let text = id.to_string();
        assert_eq!(ResponseId::parse(&text), Some(id));
        for bad in [
            "resp_",
            "resp_123_conv",
            "msg_0123456789abcdef0123456789abcdef_conv",
            "resp_0123456789abcdef0123456789abcdef_",
            "resp_0123456789abcdef0123456789abcdef_a/b",
            "resp_0123456789abcdef0123456789abcdefXconv",
        ] {
            assert_eq!(ResponseId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_from_the_same_key_are_the_same() {
        assert_eq!(new_id("conv_", Some("k")), new_id("conv_", Some("k")));
        assert_ne!(new_id("conv_", Some("k")), new_id("conv_", Some("l")));
        assert_ne!(new_id("conv_", None), new_id("conv_", None));
        assert_eq!(
            ResponseId::new("c", Some("k")),
            ResponseId::new("c", Some("k"))
        );
        assert_ne!(
            ResponseId::new("c", Some("k")).turn,
            ResponseId::new("d", Some("k")).turn
        );
    }

    #[test]
    fn metadata_past_its_bounds_is_refused() {
        let many: Metadata = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_metadata(&many).is_err());
        let long: Metadata = [("k".to_owned(), "v".repeat(513))].into();
        assert!(check_metadata(&long).is_err());
        let key: Metadata = [("k".repeat(65), "v".into())].into();
        assert!(check_metadata(&key).is_err());
        let fine: Metadata = (0..16).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_metadata(&fine).is_ok());
    }

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
