//! How each kind of failure below the HTTP layer is answered: its status, its code, and whether
//! its message may be shown to the caller.

use axum::http::StatusCode;

use crate::agent::FailureKind;
use crate::artifact::ArtifactError;
use crate::channel::PairingError;
use crate::{Error, StoreFault};

/// Status, code, and whether the message may be shown (false: internal detail, logged only).
pub(super) type Class = (StatusCode, &'static str, bool);

pub(super) const INTERNAL: Class = (StatusCode::INTERNAL_SERVER_ERROR, "internal", false);

/// The status and code of an artifact store error.
fn artifact_class(error: &ArtifactError) -> Class {
    match error {
        ArtifactError::InvalidName { .. }
        | ArtifactError::InvalidMime { .. }
        | ArtifactError::InvalidScope(_) => (StatusCode::BAD_REQUEST, "invalid_artifact", true),
        ArtifactError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large", true),
        ArtifactError::TooManyVersions { .. } => (StatusCode::CONFLICT, "too_many_versions", true),
        ArtifactError::NotConfigured => (StatusCode::NOT_FOUND, "no_artifact_store", true),
        ArtifactError::Unavailable { .. } | ArtifactError::Io { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "artifact_store_unavailable",
            false,
        ),
        _ => INTERNAL,
    }
}

pub(super) fn runtime_class(error: &Error) -> Class {
    match error {
        Error::InvalidKey(_) => (StatusCode::BAD_REQUEST, "invalid_key", true),
        Error::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large", true),
        Error::Busy { .. } => (StatusCode::CONFLICT, "busy", true),
        Error::Deleted { .. } => (StatusCode::CONFLICT, "deleted", true),
        Error::Overloaded { .. } => (StatusCode::TOO_MANY_REQUESTS, "overloaded", true),
        Error::AtCapacity { .. } => (StatusCode::TOO_MANY_REQUESTS, "at_capacity", true),
        Error::ConcurrencyLimitExceeded { .. } => (
            StatusCode::TOO_MANY_REQUESTS,
            "concurrency_limit_exceeded",
            true,
        ),
        Error::Draining => (StatusCode::SERVICE_UNAVAILABLE, "draining", true),
        Error::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "timeout", true),
        Error::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists", true),
        Error::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found", true),
        Error::InvalidRequest(_) => (StatusCode::BAD_REQUEST, "bad_request", true),
        Error::RequestMismatch { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "request_mismatch", true)
        }
        Error::AgentFailed { kind, .. } => agent_class(*kind),
        Error::OwnedElsewhere { .. } => (StatusCode::MISDIRECTED_REQUEST, "owned_elsewhere", true),
        Error::Artifacts(source) => artifact_class(source),
        error => match error.store_fault() {
            Some(fault) => store_class(fault, matches!(error, Error::Storage(_))),
            None => INTERNAL,
        },
    }
}

/// The status of each kind of failed turn. The message is always the generic one for its code
/// (`failure_message`): an agent's or a model server's words may hold internal detail.
fn agent_class(kind: FailureKind) -> Class {
    let status = match kind {
        // The upstream asks for patience: the service is there, just not for this client now.
        FailureKind::ModelRateLimited => StatusCode::SERVICE_UNAVAILABLE,
        FailureKind::ModelTimeout => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, kind.code(), false)
}

/// What the caller of a failed turn is told, per kind: what happened and what to do, never the
/// agent's own words (they are in the session's history and the server log).
pub(super) fn failure_message(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::ModelRateLimited => {
            "the model server is rate limiting this service; the turn failed and is recorded \
             in the session's history. Send the message again (with a new Idempotency-Key) \
             after Retry-After"
        }
        FailureKind::ModelUnavailable => {
            "the model server failed or could not be reached; the turn failed and is recorded \
             in the session's history. Send the message again later, with a new \
             Idempotency-Key"
        }
        FailureKind::ModelTimeout => {
            "the model server did not answer in time; the turn failed and is recorded in the \
             session's history. Send the message again later, with a new Idempotency-Key"
        }
        FailureKind::ModelRefused => {
            "the model server refused the request (its key, the model's name or the request \
             itself): the service's configuration needs fixing, and sending the message again \
             will not help. The turn failed and is recorded in the session's history"
        }
        FailureKind::ModelMalformed => {
            "the model server sent a reply this service cannot use (not a chat-completions \
             stream, or past its bounds); the turn failed and is recorded in the session's \
             history"
        }
        _ => {
            "the agent failed on this turn; the turn is recorded as failed in the session's \
             history and the session goes on from its last state"
        }
    }
}

/// The status of a store's fault; `listing` for a store call about no one session (a listing,
/// a user's deletion), where a refused request is the caller's.
fn store_class(fault: StoreFault, listing: bool) -> Class {
    match fault {
        StoreFault::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", false),
        StoreFault::Conflict => (StatusCode::CONFLICT, "conflict", true),
        // Another process owns the session now; a retry reaches it (through forwarding).
        StoreFault::NotOwner => (StatusCode::SERVICE_UNAVAILABLE, "not_owner", true),
        StoreFault::Fenced => (StatusCode::SERVICE_UNAVAILABLE, "fenced", true),
        // Stored on the primary, not confirmed by enough replicas in time: the message says
        // what the caller may assume (`public_message`), without the store's wording.
        StoreFault::NotReplicated => (StatusCode::SERVICE_UNAVAILABLE, "not_replicated", false),
        StoreFault::InvalidRequest if listing => (StatusCode::BAD_REQUEST, "bad_request", true),
        _ => INTERNAL,
    }
}

pub(super) fn pairing_class(error: &PairingError) -> Class {
    match error {
        PairingError::Unavailable { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", false)
        }
        _ => INTERNAL,
    }
}
