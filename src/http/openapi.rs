//! The OpenAPI 3.1 document of the API, derived from the handlers' annotations and the types
//! they read and write; served at `GET /openapi.json` and kept in `docs/openapi.json` (a test
//! fails when the two differ).

use std::collections::BTreeMap;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoParams, Modify, OpenApi};

use super::error::{ErrorBody, ErrorDetail};
use super::{admin, artifacts, channels, events, ops, sessions};

/// The error answers any route may give, each with an [`ErrorBody`]; which code goes with
/// which status is in `docs/http-api.md` ("Errors").
pub(crate) struct Refusals;

/// Error statuses and what they mean, in the document.
const REFUSALS: &[(u16, &str)] = &[
    (400, "A malformed id, body or query"),
    (401, "No valid bearer token"),
    (403, "The token does not reach this resource"),
    (404, "No such session, pairing or route"),
    (405, "The route does not take this method"),
    (
        408,
        "The request body did not arrive within the request timeout",
    ),
    (409, "busy, deleted, conflict or already_exists"),
    (413, "The body or input is over its limit"),
    (415, "A JSON route without `Content-Type: application/json`"),
    (
        421,
        "Another live process owns the session (`owner` names it)",
    ),
    (
        429,
        "A queue, turn or session limit is reached (`Retry-After`)",
    ),
    (500, "A bug (logged on the server)"),
    (
        502,
        "The agent failed (`agent_failed`), the model server failed, refused the request or \
         sent an unusable stream (`model_unavailable`, `model_refused`, `model_malformed`), or \
         the owning process failed",
    ),
    (
        503,
        "Draining, the store is unavailable, the owner cannot be reached, or the model server \
         is rate limiting (`model_rate_limited`, with its `Retry-After`)",
    ),
    (
        504,
        "No answer within the request timeout (`timeout`), or the model server did not answer \
         in time (`model_timeout`)",
    ),
];

impl utoipa::IntoResponses for Refusals {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::response::Response>> {
        REFUSALS
            .iter()
            .map(|(status, description)| {
                let content = ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build();
                let response = ResponseBuilder::new()
                    .description(*description)
                    .content("application/json", content)
                    .build();
                (status.to_string(), RefOr::T(response))
            })
            .collect()
    }
}

// The structs below only describe path parameters to the document; handlers read the path
// as tuples.

/// A session's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct SessionPath {
    /// The user id: 1–256 bytes, no control characters.
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user: String,
    /// The session id: 1–256 bytes, no control characters.
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    session: String,
}

/// A user's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct UserPath {
    /// The user id: 1–256 bytes, no control characters.
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user: String,
}

/// A channel's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ChannelPath {
    /// The channel's name (e.g. `slack`).
    #[param(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    channel: String,
}

/// A pairing's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct PairingPath {
    /// The channel's name.
    #[param(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    channel: String,
    /// The account's id on the channel.
    #[param(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    channel_user: String,
}

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
        sessions::delete_session,
        events::list_events,
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
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "sessions", description = "A user's sessions: turns, history, state"),
        (name = "artifacts", description = "Named, versioned blobs of a session or a user"),
        (name = "channels", description = "Bots on chat channels, and account pairings"),
        (name = "operations", description = "Probes, metrics, this document, and the operator routes"),
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
