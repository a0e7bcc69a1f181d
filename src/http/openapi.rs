//! The OpenAPI 3.1 document of the API, derived from the handlers' annotations and the types
//! they read and write; served at `GET /openapi.json` and kept in `docs/openapi.json` (a test
//! fails when the two differ).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::{ErrorBody, ErrorDetail};
use super::{admin, artifacts, channels, events, openai, ops, sent_requests, sessions, state};

/// Adds the bearer-token scheme every route but the probes requires.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "turnstile",
        description = "One actor per live conversation session: turns, history, channels and \
                       operations. `docs/http-api.md` has the semantics."
    ),
    paths(
        sessions::post_turn,
        sessions::interrupt,
        sessions::get_session,
        sessions::clear,
        sessions::fork,
        state::edit_state,
        state::list_state_keys,
        sessions::delete_session,
        events::list_events,
        events::get_turn,
        sent_requests::get_sent_requests,
        sessions::list_sessions,
        sessions::delete_user,
        artifacts::put_session_artifact,
        artifacts::get_session_artifact,
        artifacts::list_session_artifacts,
        artifacts::session_artifact_versions,
        artifacts::put_user_artifact,
        artifacts::get_user_artifact,
        artifacts::list_user_artifacts,
        artifacts::user_artifact_versions,
        channels::post_message,
        channels::put_pairing,
        channels::get_pairing,
        channels::delete_pairing,
        ops::healthz,
        ops::readyz,
        ops::metrics,
        openapi_json_route,
        admin::me,
        admin::live,
        admin::passivate,
        admin::stats,
        openai::list_models,
        openai::get_model,
        openai::conversations::create_conversation,
        openai::conversations::get_conversation,
        openai::conversations::update_conversation,
        openai::conversations::delete_conversation,
        openai::items::list_items,
        openai::items::add_items,
        openai::items::get_item,
        openai::items::delete_item,
        openai::responses::create_response,
        openai::responses::get_response,
        openai::responses::cancel_response,
        openai::responses::response_input_items,
        openai::chat::chat_completions,
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "sessions", description = "A user's sessions: turns, history, state"),
        (name = "artifacts", description = "Named, versioned blobs of a session or a user"),
        (name = "channels", description = "Bots on chat channels, and account pairings"),
        (name = "operations", description = "Probes, metrics, this document, and the operator routes"),
        (name = "openai", description = "OpenAI's API on the same sessions: conversations, responses, chat completions, models (docs/openai-api.md)"),
    )
)]
struct ApiDoc;

/// The OpenAPI 3.1 document of the HTTP API, as pretty-printed JSON.
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes")
}

/// `GET /openapi.json`: this document. Never needs a token.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", security(),
    responses((status = 200, description = "This document", content_type = "application/json",
        body = Object)))]
pub(crate) async fn openapi_json_route() -> Response {
    let mut response = openapi_json().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
