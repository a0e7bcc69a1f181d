//! [`ApiError`]: every way a request can fail, mapped to a status and a JSON body.

mod class;

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::agent::FailureKind;
use crate::channel::{ChannelError, InboundError, InboxError, PairingError, ReceiveError};
use crate::key::KeyError;
use crate::Error;
use crate::{Owner, StoreFault};

use self::class::{failure_message, pairing_class, runtime_class, Class, INTERNAL};

/// Why an HTTP request failed. Answered as `{"error": {"code", "message"}}` with the status
/// [`ApiError::status`] gives; see `docs/http-api.md` for the table.
///
/// A 5xx answer never carries internal detail (store paths, agent errors): the detail is logged
/// and the body says only what the caller can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The runtime refused or failed the call.
    #[error(transparent)]
    Runtime(#[from] Error),
    /// A turn's request failed: as [`ApiError::Runtime`], and its body also says whether the
    /// session kept the turn (`kept`).
    #[error(transparent)]
    Turn(Error),
    /// Channel routing or pairing refused the request.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The pairing store failed.
    #[error(transparent)]
    Pairing(#[from] PairingError),
    /// A channel adapter did not take a platform's request (`docs/channels.md`).
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// A user or session id in the path broke a key rule.
    #[error("invalid key: {0}")]
    InvalidKey(#[from] KeyError),
    /// The body could not be read as the JSON the route expects.
    #[error("bad request body: {0}")]
    BadBody(String),
    /// A query parameter or path segment is invalid.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// No bearer token, or one that is not configured.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The token is valid but does not reach this resource.
    #[error("{0}")]
    Forbidden(String),
    /// Nothing at this path (no such session, pairing or route).
    #[error("{0}")]
    NotFound(String),
    /// The request would change a session's log, which only ever grows (an OpenAI item's
    /// deletion): nothing was changed.
    #[error("{0}")]
    AppendOnly(String),
    /// The route exists but not with this method.
    #[error("this route does not accept that method")]
    MethodNotAllowed,
    /// The body is larger than the configured limit.
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The body is not `application/json`.
    #[error("the request body must be JSON, with `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// The request body did not arrive whole within the request timeout; the request was not
    /// handled and the connection is closed.
    #[error(
        "the request body did not arrive within {}; nothing was done, send it again",
        seconds(*after)
    )]
    BodyTimeout {
        /// The request timeout.
        after: Duration,
    },
    /// A request that runs no turn did not finish within the request timeout.
    #[error(
        "no answer within {after:?}; the request may still take effect, so check before \
         repeating it"
    )]
    RequestTimeout {
        /// The request timeout.
        after: Duration,
    },
    /// Something failed that the caller cannot act on (the detail is logged, never shown).
    #[error("internal error: {0}")]
    Internal(String),
    /// `/readyz`: the store has not answered this process's probes for a while, so turns here
    /// would fail (what the probes met is logged by the runtime, never shown: it may name
    /// hosts).
    #[error(
        "not ready: the store has not answered this process for {} s; send requests to another \
         process until it does",
        silent.as_secs()
    )]
    StoreUnanswered {
        /// Since the store last answered.
        silent: Duration,
    },
    /// The process that owns the session could not be reached (it is down, or its address
    /// does not answer); nothing was sent to it. Its lease expires within `retry_after`, and
    /// then any process takes the session.
    #[error(
        "the process that owns this session cannot be reached; nothing was sent to it. Its \
         lease expires within {}, then another process serves the session: retry after that",
        seconds(*retry_after)
    )]
    OwnerUnreachable {
        /// The owner's lease TTL.
        retry_after: Duration,
    },
    /// The process that owns the session failed after the request was sent to it, before it
    /// answered.
    #[error(
        "the process that owns this session failed before answering; the request may have \
         taken effect, so check the session before repeating it"
    )]
    OwnerFailed {
        /// The owner's lease TTL.
        retry_after: Duration,
    },
    /// An earlier run of this process (same address) still holds the session's lease.
    #[error(
        "an earlier run of this process still holds this session's lease; it expires within \
         {}, then the session is served again: retry after that",
        seconds(*retry_after)
    )]
    OwnerRestarted {
        /// The lease TTL.
        retry_after: Duration,
    },
    /// The answer did not come within the request timeout.
    #[error("{}", timeout_message(*after, *interrupted))]
    Timeout {
        /// The request timeout.
        after: Duration,
        /// Whether the turn was interrupted (the request asked for it) or goes on.
        interrupted: bool,
    },
}

/// Whole seconds, rounded up, at least one: the form of `Retry-After`.
fn retry_seconds(after: Duration) -> u64 {
    let whole = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    whole.max(1)
}

fn seconds(after: Duration) -> String {
    match retry_seconds(after) {
        1 => "1 second".into(),
        n => format!("{n} seconds"),
    }
}

fn timeout_message(after: Duration, interrupted: bool) -> String {
    if interrupted {
        format!("no answer within {after:?}; the turn was interrupted as the request asked")
    } else {
        format!(
            "no answer within {after:?}; the turn goes on, and its outcome will be in the \
             session's history"
        )
    }
}

impl ApiError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        self.class().0
    }

    /// The stable code in the error body.
    pub fn code(&self) -> &'static str {
        self.class().1
    }

    fn class(&self) -> Class {
        match self {
            Self::Runtime(e) | Self::Turn(e) => runtime_class(e),
            Self::Channel(ChannelError::Runtime(e)) => runtime_class(e),
            Self::Channel(ChannelError::Pairing(e)) | Self::Pairing(e) => pairing_class(e),
            Self::Channel(ChannelError::InvalidField { .. }) => {
                (StatusCode::BAD_REQUEST, "invalid_field", true)
            }
            Self::Channel(ChannelError::ReservedUser { .. }) => {
                (StatusCode::BAD_REQUEST, "reserved_user", true)
            }
            Self::Channel(ChannelError::InvalidKey(_)) | Self::InvalidKey(_) => {
                (StatusCode::BAD_REQUEST, "invalid_key", true)
            }
            Self::BadBody(_) => (StatusCode::BAD_REQUEST, "bad_body", true),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request", true),
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized", true),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", true),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found", true),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", true),
            Self::AppendOnly(_) => (StatusCode::CONFLICT, "append_only", true),
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large", true),
            Self::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                true,
            ),
            Self::BodyTimeout { .. } => (StatusCode::REQUEST_TIMEOUT, "body_timeout", true),
            Self::Timeout { .. } | Self::RequestTimeout { .. } => {
                (StatusCode::GATEWAY_TIMEOUT, "timeout", true)
            }
            Self::OwnerUnreachable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "owner_unreachable", true)
            }
            Self::OwnerFailed { .. } => (StatusCode::BAD_GATEWAY, "owner_failed", true),
            Self::OwnerRestarted { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "owner_restarted", true)
            }
            Self::Internal(_) => INTERNAL,
            Self::Receive(e) => receive_class(e),
            Self::StoreUnanswered { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", true)
            }
        }
    }

    /// The owner named by an `owned_elsewhere` refusal.
    fn owner(&self) -> Option<&Owner> {
        match self {
            Self::Runtime(Error::OwnedElsewhere { owner, .. })
            | Self::Turn(Error::OwnedElsewhere { owner, .. })
            | Self::Channel(ChannelError::Runtime(Error::OwnedElsewhere { owner, .. })) => {
                Some(owner)
            }
            _ => None,
        }
    }

    /// The failed turn's kind, when the error is one.
    fn failure(&self) -> Option<FailureKind> {
        match self {
            Self::Runtime(Error::AgentFailed { kind, .. })
            | Self::Turn(Error::AgentFailed { kind, .. })
            | Self::Channel(ChannelError::Runtime(Error::AgentFailed { kind, .. })) => Some(*kind),
            _ => None,
        }
    }

    /// How long a client should wait before trying again, when the refusal says.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::OwnerUnreachable { retry_after }
            | Self::OwnerFailed { retry_after }
            | Self::OwnerRestarted { retry_after } => Some(*retry_after),
            // The model server's own `Retry-After`, when it gave one.
            Self::Runtime(Error::AgentFailed {
                retry_after: Some(after),
                ..
            })
            | Self::Turn(Error::AgentFailed {
                retry_after: Some(after),
                ..
            })
            | Self::Channel(ChannelError::Runtime(Error::AgentFailed {
                retry_after: Some(after),
                ..
            })) => Some(*after),
            _ => match self.status() {
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                    Some(Duration::from_secs(1))
                }
                _ => None,
            },
        }
    }

    /// The same refusal, answered as a turn's (with `kept` where the turn's fate is in doubt).
    pub(crate) fn of_turn(self) -> Self {
        match self {
            Self::Runtime(e) | Self::Channel(ChannelError::Runtime(e)) => Self::Turn(e),
            other => other,
        }
    }

    /// What became of the turn of a request that failed, where the failure leaves it in doubt;
    /// `None` where no turn is at stake or the code already says (a refusal before anything
    /// ran). See [`Kept`].
    pub(crate) fn kept(&self) -> Option<Kept> {
        let error = match self {
            Self::Turn(e) => e,
            Self::Timeout { .. } => return Some(Kept::Yes),
            _ => return None,
        };
        match error {
            Error::Store { .. } => Some(match error.store_fault() {
                Some(StoreFault::NotReplicated) => Kept::Yes,
                // A timeout or a lost connection does not say whether the write committed.
                Some(StoreFault::Unavailable) => Kept::Unknown,
                _ => Kept::No,
            }),
            Error::Activation { .. } => Some(Kept::No),
            // The turn ran and failed, and the history holds it as failed.
            Error::AgentFailed { .. } => Some(Kept::Yes),
            _ => None,
        }
    }

    /// The message the caller sees: the error's own for 4xx and the few 5xx that carry nothing
    /// internal, a generic sentence otherwise.
    fn public_message(&self) -> String {
        let (status, code, shown) = self.class();
        if shown {
            return self.to_string();
        }
        if let Some(kind) = self.failure() {
            return failure_message(kind).into();
        }
        match (status, code) {
            (_, "not_replicated") => {
                "the turn is stored on the primary and the session goes on from it, but fewer \
                 replicas than required confirmed it in time, so it is not acknowledged: a \
                 failover before they catch up could lose it. Do not send it again as a new \
                 turn; a retry with the same Idempotency-Key returns its outcome once the \
                 replicas hold it, and this answer until then"
                    .into()
            }
            (StatusCode::SERVICE_UNAVAILABLE, _) => match self.kept() {
                Some(Kept::Unknown) => {
                    "the store did not answer the session's write, so the turn is not \
                     acknowledged, and whether it was stored is not known yet: the session reads \
                     it back before its next turn, and never shows or builds on it until then. \
                     Retry with the same Idempotency-Key: if it was stored, the retry gets its \
                     outcome; if not, it runs once"
                }
                Some(Kept::No) => {
                    "the store is unavailable, so the session could not read what it holds and \
                     nothing of this turn ran or was stored; retry later, with the same \
                     Idempotency-Key"
                }
                Some(Kept::Yes) | None => {
                    "the store is unavailable and nothing was changed; retry later"
                }
            }
            .into(),
            _ => "internal error; it was logged on the server".into(),
        }
    }
}

impl ApiError {
    /// The JSON body, `{"error": {"code", "message"}}`; logs the detail of a server error,
    /// which the body leaves out.
    pub(crate) fn body(&self) -> serde_json::Value {
        let status = self.status();
        // Only a 500 is a bug; the other server errors are the service saying how it is (a store
        // that is down, a drain, a slow model) and are logged below ERROR.
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(status = status.as_u16(), error = %self, "request failed");
        } else if matches!(
            self.code(),
            "draining" | "owner_unreachable" | "owner_restarted"
        ) || matches!(self, Self::StoreUnanswered { .. })
        {
            // Expected for a while during a drain or a failover, once per request: the
            // forwarder logs the failed forward itself.
            tracing::debug!(status = status.as_u16(), error = %self, "request refused");
        } else if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %self, "request failed");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.public_message(),
                owner: self.owner().map(|owner| owner.address.clone()),
                kept: self.kept(),
            },
        };
        serde_json::to_value(body).expect("an error body is plain JSON")
    }
}

/// Every error's body.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong, for a program (`code`) and a person (`message`).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// A stable code (`docs/http-api.md`, "Errors"); a failed turn's says what failed:
    /// `agent_failed`, `model_rate_limited`, `model_unavailable`, `model_timeout`,
    /// `model_refused`, `model_malformed`.
    #[schema(value_type = String)]
    code: &'static str,
    /// What happened and what to do; never internal detail.
    message: String,
    /// `owned_elsewhere`: the address of the process that owns the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    /// What became of the turn: `true` stored (a failed turn too: the history holds it as
    /// failed), `false` not stored, `null` not known yet (see "Errors").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<bool>)]
    kept: Option<Kept>,
}

/// What became of a turn whose request failed (the `kept` field of an error body).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// It is stored (or still runs, and will be): do not send it again as a new turn.
    Yes,
    /// Nothing of it is stored.
    No,
    /// The store's answer to its write was lost: it may be stored. The session reads it back
    /// before it builds on the session again; a retry with the same key finds out.
    Unknown,
}

impl serde::Serialize for Kept {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Yes => serializer.serialize_bool(true),
            Self::No => serializer.serialize_bool(false),
            Self::Unknown => serializer.serialize_none(),
        }
    }
}

/// On the response to an `owned_elsewhere` refusal made here: the owner, so that the
/// forwarding layer can send the request there without parsing the body.
#[derive(Debug, Clone)]
pub(crate) struct OwnerHint(pub Owner);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let owner = self.owner().cloned();
        let retry_after = self.retry_after();
        let mut response = (status, Json(self.body())).into_response();
        let headers = response.headers_mut();
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // Refusals past a bound clear up quickly, and an owner's lease expires within its TTL;
        // say so, so that clients back off for that long rather than hammer or give up.
        if let Some(after) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_seconds(after)));
        }
        if status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still be on its way; the connection cannot be reused.
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(owner) = owner {
            if let Ok(value) = HeaderValue::from_str(&owner.address) {
                headers.insert(super::headers::OWNER_HEADER, value);
            }
            response.extensions_mut().insert(OwnerHint(owner));
        }
        response
    }
}

/// The status and code of a platform request a channel adapter did not take.
fn receive_class(error: &ReceiveError) -> Class {
    match error {
        ReceiveError::NotConfigured(_) => (StatusCode::NOT_FOUND, "not_found", true),
        ReceiveError::Inbound(InboundError::Unauthenticated { .. }) => {
            (StatusCode::UNAUTHORIZED, "bad_signature", true)
        }
        ReceiveError::Inbound(_) => (StatusCode::BAD_REQUEST, "bad_body", true),
        ReceiveError::Inbox(InboxError::Full { .. }) => {
            (StatusCode::SERVICE_UNAVAILABLE, "inbox_full", true)
        }
        // The detail may name folders: logged, not shown.
        ReceiveError::Inbox(_) => (StatusCode::SERVICE_UNAVAILABLE, "inbox_unavailable", false),
        ReceiveError::Stopping => (StatusCode::SERVICE_UNAVAILABLE, "draining", true),
    }
}

#[cfg(test)]
mod tests;
