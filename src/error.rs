//! The crate-level error.

use std::sync::Arc;
use std::time::Duration;

use crate::key::{KeyError, SessionKey};
use crate::store::StoreError;

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call did not produce an [`crate::Outcome`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key broke a validation rule.
    #[error("invalid session key: {0}")]
    InvalidKey(#[from] KeyError),
    /// The input is larger than the runtime accepts.
    #[error("input is {len} bytes; the limit is {max} bytes")]
    TooLarge {
        /// Size of the input.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// The session is busy and the call asked for `Reject`.
    #[error("session {key} is busy with another turn")]
    Busy {
        /// The session.
        key: SessionKey,
    },
    /// The session's queue is full; try again later.
    #[error("session {key} already has {queued} messages waiting (the limit); try again later")]
    Overloaded {
        /// The session.
        key: SessionKey,
        /// Messages already waiting.
        queued: usize,
    },
    /// The runtime holds as many live sessions as it may and none could be passivated in time.
    #[error("the runtime is at its capacity of {capacity} live sessions; try again later")]
    AtCapacity {
        /// The configured capacity.
        capacity: usize,
    },
    /// The runtime-wide limit on concurrent turns was reached.
    #[error("{limit} turns are already running, the runtime-wide limit; try again later")]
    ConcurrencyLimitExceeded {
        /// The configured limit.
        limit: usize,
    },
    /// The runtime is draining or shut down and admits no new calls.
    #[error("the runtime is draining and admits no new calls")]
    Draining,
    /// The agent returned an error or panicked. The turn is recorded as failed: its inputs and
    /// a `turn_failed` event with `kind`'s code and `message` (none of its output, tool events
    /// or state changes), and the session goes on from its state before the turn. A retry with
    /// the same request id gets this same failure without running again; send it with a new
    /// request id to try again.
    #[error("the agent failed on session {key}: {message}")]
    AgentFailed {
        /// The session.
        key: SessionKey,
        /// What the agent reported (or the panic message), as the `turn_failed` event keeps it.
        message: String,
        /// The class of the failure: [`FailureKind::Agent`](crate::FailureKind::Agent) unless
        /// the agent returned an [`AgentFailure`](crate::AgentFailure) saying otherwise.
        kind: crate::agent::FailureKind,
        /// How long the upstream asked the caller to wait before trying again, when it said
        /// (a model's rate limit).
        retry_after: Option<Duration>,
    },
    /// The store failed an operation on one session; its error says what it met. On a turn
    /// this means the turn is not acknowledged, and the session never shows it or builds on it:
    /// a write the store refused stored nothing, and one whose answer was lost
    /// ([`StoreError::is_environmental`]: a timeout, a lost connection) may or may not have
    /// committed — the session reads it back before its next turn, and a retry with the same
    /// request id finds out. With [`StoreError::NotReplicated`] it *was* written (to the
    /// primary, not to enough replicas in time): the session goes on from it, and it is never
    /// written again. A retry of a stored turn (same request id) whose replica check failed
    /// answers what the check met: the store may no longer hold it (then `Conflict`).
    #[error("{}", on_session(key, source))]
    Store {
        /// The session.
        key: SessionKey,
        /// What the store said.
        #[source]
        source: Arc<StoreError>,
    },
    /// A store operation that concerns no single session (listing, deleting a user) failed.
    #[error("store operation failed: {0}")]
    Storage(#[source] Arc<StoreError>),
    /// The session's stored data could not be read — to activate it, or to find out what
    /// became of its last write before building on it — so nothing of this call ran.
    #[error("session {key} could not be activated: {source}")]
    Activation {
        /// The session.
        key: SessionKey,
        /// What the store said.
        #[source]
        source: Arc<StoreError>,
    },
    /// The session was deleted while the message waited.
    #[error("session {key} was deleted before this message ran")]
    Deleted {
        /// The session.
        key: SessionKey,
    },
    /// The session's actor stopped unexpectedly (a bug); the message may not have run.
    #[error("session {key} stopped unexpectedly; the message may not have run")]
    SessionFailed {
        /// The session.
        key: SessionKey,
    },
    /// A session that must not exist yet (the target of a fork) already exists.
    #[error("session {key} already exists")]
    AlreadyExists {
        /// The session.
        key: SessionKey,
    },
    /// A session that must exist (the source of a fork) does not.
    #[error("session {key} does not exist")]
    NotFound {
        /// The session.
        key: SessionKey,
    },
    /// A message came with a request id the session already accepted, but says something else
    /// (its [`crate::CallOptions::fingerprint`] differs): a request id names one request, so it
    /// was neither run nor answered with the first one's outcome. Send it with a new id.
    #[error(
        "session {key} already took a different request with request id {request_id:?}; send \
         this one with a new request id"
    )]
    RequestMismatch {
        /// The session.
        key: SessionKey,
        /// The request id.
        request_id: String,
    },
    /// The request's arguments do not make sense (the message says which and why).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A caller-side timeout expired before the answer came (the turn itself goes on).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Another live process owns the session (it holds the session's lease); nothing ran here.
    /// Send the request to `owner.address` (`turnstile serve` forwards it there itself).
    #[error("session {key} is owned by another process, at {}", owner.address)]
    OwnedElsewhere {
        /// The session.
        key: SessionKey,
        /// Who owns it.
        owner: crate::store::Owner,
    },
    /// The artifact store failed while the runtime deleted or forked artifacts.
    #[error("artifact store: {0}")]
    Artifacts(#[source] Arc<crate::artifact::ArtifactError>),
    /// The memory store failed (ingesting, searching or deleting memory); see
    /// [`crate::memory`].
    #[error("memory: {0}")]
    Memory(#[source] Arc<crate::memory::MemoryError>),
}

/// What a store's failure means to a caller: for a front door that answers in its own terms
/// (HTTP statuses) without reading the store's own error, which stays in the [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreFault {
    /// The store did not answer, was locked, or its machine failed (a full or read-only disk):
    /// the service is there, its storage is not. A write's outcome may be unknown.
    Unavailable,
    /// Another writer changed the session first; nothing was written.
    Conflict,
    /// Another process owns the session now (a retry reaches it through forwarding).
    NotOwner,
    /// The write came under a lease older than the session's newest; nothing was written.
    Fenced,
    /// Written to the primary, not confirmed by enough replicas in time: kept, and not
    /// acknowledged.
    NotReplicated,
    /// The store was asked something it does not accept (the caller's fault).
    InvalidRequest,
    /// Anything else (corrupt data, a newer schema, a bug): the service's fault.
    Other,
}

/// The store's error about `key`, led by the session unless its text already names it.
fn on_session(key: &SessionKey, source: &StoreError) -> String {
    let text = source.to_string();
    if text.starts_with(&format!("session {key}:")) {
        text
    } else {
        format!("session {key}: {text}")
    }
}

impl Error {
    pub(crate) fn store(key: &SessionKey, source: StoreError) -> Self {
        Self::Store {
            key: key.clone(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn storage(source: StoreError) -> Self {
        Self::Storage(Arc::new(source))
    }

    pub(crate) fn memory(source: crate::memory::MemoryError) -> Self {
        Self::Memory(Arc::new(source))
    }

    /// Whether the store refused a write because another writer changed the session
    /// (`StoreError::Conflict`).
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Self::Store { source, .. } if matches!(**source, StoreError::Conflict { .. }))
    }

    /// The store's fault behind this error, when a store failed ([`Error::Store`],
    /// [`Error::Activation`], [`Error::Storage`]).
    pub fn store_fault(&self) -> Option<StoreFault> {
        let source = match self {
            Self::Store { source, .. }
            | Self::Activation { source, .. }
            | Self::Storage(source) => source,
            _ => return None,
        };
        Some(match source.as_ref() {
            error if error.is_environmental() => StoreFault::Unavailable,
            StoreError::Conflict { .. } => StoreFault::Conflict,
            StoreError::NotOwner { .. } => StoreFault::NotOwner,
            StoreError::Fenced { .. } => StoreFault::Fenced,
            StoreError::NotReplicated { .. } => StoreFault::NotReplicated,
            StoreError::InvalidRequest(_) => StoreFault::InvalidRequest,
            _ => StoreFault::Other,
        })
    }

    /// A short, stable code for logs, metrics and the HTTP API.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidKey(_) => "invalid_key",
            Self::TooLarge { .. } => "too_large",
            Self::Busy { .. } => "busy",
            Self::Overloaded { .. } => "overloaded",
            Self::AtCapacity { .. } => "at_capacity",
            Self::ConcurrencyLimitExceeded { .. } => "concurrency_limit_exceeded",
            Self::Draining => "draining",
            Self::AgentFailed { kind, .. } => kind.code(),
            Self::Store { source, .. } => match source.as_ref() {
                StoreError::NotOwner { .. } => "not_owner",
                StoreError::Fenced { .. } => "fenced",
                StoreError::NotReplicated { .. } => "not_replicated",
                _ => "store",
            },
            Self::Storage(_) => "store",
            Self::Activation { .. } => "activation",
            Self::Deleted { .. } => "deleted",
            Self::SessionFailed { .. } => "session_failed",
            Self::AlreadyExists { .. } => "already_exists",
            Self::NotFound { .. } => "not_found",
            Self::InvalidRequest(_) => "invalid_request",
            Self::RequestMismatch { .. } => "request_mismatch",
            Self::Timeout(_) => "timeout",
            Self::OwnedElsewhere { .. } => "owned_elsewhere",
            Self::Artifacts(_) => "artifact_store",
            Self::Memory(_) => "memory",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_names_its_session_once() {
        let key = SessionKey::new("alice", "s1").unwrap();
        let down = Error::store(
            &key,
            StoreError::Unavailable {
                backend: "redis",
                detail: "connection refused".into(),
            },
        );
        assert_eq!(
            down.to_string(),
            "session alice/s1: redis store is unavailable: connection refused"
        );
        let behind = Error::store(
            &key,
            StoreError::Conflict {
                key: key.clone(),
                expected: 2,
                found: 1,
            },
        )
        .to_string();
        assert!(
            behind.starts_with("session alice/s1: stored version is 1")
                && behind.matches("alice/s1").count() == 1,
            "{behind}"
        );
    }
}
