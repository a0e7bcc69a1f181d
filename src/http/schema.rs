//! What several routes share in the OpenAPI document and in their answers: the refusals any
//! route may give, the path parameters, a deletion's answer. Handlers use these; the document
//! lists them.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoParams, ToSchema};

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

/// A deletion's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Deleted {
    /// Whether there was something to delete.
    deleted: bool,
}

impl Deleted {
    pub(crate) fn new(deleted: bool) -> Self {
        Self { deleted }
    }
}
