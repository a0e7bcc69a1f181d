//! The mapping of errors to statuses, codes and bodies.

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::key::SessionKey;
use crate::StoreError;

fn key() -> SessionKey {
    SessionKey::new("u", "s").unwrap()
}

#[test]
fn each_runtime_refusal_has_its_documented_status() {
    let cases: Vec<(Error, u16, &str)> = vec![
        (Error::Busy { key: key() }, 409, "busy"),
        (
            Error::Overloaded {
                key: key(),
                queued: 64,
            },
            429,
            "overloaded",
        ),
        (Error::AtCapacity { capacity: 1 }, 429, "at_capacity"),
        (
            Error::ConcurrencyLimitExceeded { limit: 1 },
            429,
            "concurrency_limit_exceeded",
        ),
        (Error::Draining, 503, "draining"),
        (Error::TooLarge { len: 2, max: 1 }, 413, "too_large"),
        (Error::Deleted { key: key() }, 409, "deleted"),
        (Error::SessionFailed { key: key() }, 500, "internal"),
        (Error::AlreadyExists { key: key() }, 409, "already_exists"),
        (Error::NotFound { key: key() }, 404, "not_found"),
        (Error::InvalidRequest("at_seq".into()), 400, "bad_request"),
        (
            Error::RequestMismatch {
                key: key(),
                request_id: "k".into(),
            },
            422,
            "request_mismatch",
        ),
    ];
    for (error, status, code) in cases {
        let api = ApiError::from(error);
        assert_eq!((api.status().as_u16(), api.code()), (status, code), "{api}");
    }
}

#[test]
fn server_errors_never_show_their_detail() {
    let secret = PathBuf::from("/srv/secret/path");
    let io = StoreError::Io {
        op: "read",
        path: secret.clone(),
        source: std::io::Error::other("disk on fire"),
    };
    let api = ApiError::from(Error::Store {
        key: key(),
        source: Arc::new(io),
    });
    assert_eq!(api.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let shown = api.public_message();
    assert!(
        !shown.contains("secret") && !shown.contains("fire"),
        "{shown}"
    );

    let agent = ApiError::from(Error::AgentFailed {
        key: key(),
        message: "OPENAI_KEY=sk-123 rejected".into(),
        kind: FailureKind::Agent,
        retry_after: None,
    });
    assert_eq!(agent.status(), StatusCode::BAD_GATEWAY);
    assert!(!agent.public_message().contains("sk-123"));
}

#[test]
fn each_kind_of_failed_turn_has_its_documented_status_code_and_wait() {
    let failed = |kind, retry_after| {
        ApiError::Turn(Error::AgentFailed {
            key: key(),
            message: "upstream said sk-123 at http://10.0.0.9/v1".into(),
            kind,
            retry_after,
        })
    };
    let cases = [
        (FailureKind::Agent, 502, "agent_failed"),
        (FailureKind::ModelRateLimited, 503, "model_rate_limited"),
        (FailureKind::ModelUnavailable, 502, "model_unavailable"),
        (FailureKind::ModelTimeout, 504, "model_timeout"),
        (FailureKind::ModelRefused, 502, "model_refused"),
        (FailureKind::ModelMalformed, 502, "model_malformed"),
    ];
    assert_eq!(cases.len(), FailureKind::ALL.len(), "every kind is mapped");
    for (kind, status, code) in cases {
        let api = failed(kind, None);
        assert_eq!((api.status().as_u16(), api.code()), (status, code));
        let body = api.body();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            !message.contains("sk-123") && !message.contains("10.0.0.9"),
            "no upstream detail reaches the client: {message}"
        );
        assert_eq!(
            body["error"]["kept"], true,
            "the history holds the failed turn"
        );
    }
    let limited = failed(
        FailureKind::ModelRateLimited,
        Some(Duration::from_millis(7_200)),
    )
    .into_response();
    assert_eq!(limited.status(), 503);
    assert_eq!(
        limited.headers()["retry-after"],
        "8",
        "the upstream's wait, rounded up"
    );
    let unknown_wait = failed(FailureKind::ModelRateLimited, None).into_response();
    assert_eq!(unknown_wait.headers()["retry-after"], "1");
    let timeout = failed(FailureKind::ModelTimeout, None).into_response();
    assert!(timeout.headers().get("retry-after").is_none());
}

#[test]
fn store_io_errors_from_the_environment_are_503_and_bugs_stay_500() {
    use std::io::{Error as IoError, ErrorKind};
    let as_api = |source: IoError| {
        ApiError::from(Error::Store {
            key: key(),
            source: Arc::new(StoreError::Io {
                op: "write",
                path: PathBuf::from("/data/s"),
                source,
            }),
        })
    };
    for source in [
        IoError::from(ErrorKind::PermissionDenied),
        IoError::from(ErrorKind::ReadOnlyFilesystem),
        IoError::from(ErrorKind::StorageFull),
        IoError::from_raw_os_error(5),  // EIO
        IoError::from_raw_os_error(28), // ENOSPC
        IoError::from_raw_os_error(30), // EROFS
        IoError::from_raw_os_error(1),  // EPERM
    ] {
        let api = as_api(source);
        assert_eq!(
            (api.status(), api.code()),
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            "{api}"
        );
    }
    let bug = as_api(IoError::from(ErrorKind::InvalidData));
    assert_eq!(bug.status(), StatusCode::INTERNAL_SERVER_ERROR);
}

#[test]
fn forwarding_refusals_carry_the_lease_ttl_as_retry_after() {
    let ttl = Duration::from_millis(1_500);
    let cases = [
        (
            ApiError::OwnerUnreachable { retry_after: ttl },
            503,
            "owner_unreachable",
        ),
        (
            ApiError::OwnerRestarted { retry_after: ttl },
            503,
            "owner_restarted",
        ),
        (
            ApiError::OwnerFailed { retry_after: ttl },
            502,
            "owner_failed",
        ),
    ];
    for (error, status, code) in cases {
        assert_eq!((error.status().as_u16(), error.code()), (status, code));
        let response = error.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "2", "{code}");
    }
    assert_eq!(retry_seconds(Duration::from_millis(300)), 1);
    assert_eq!(retry_seconds(Duration::from_secs(10)), 10);
}

#[test]
fn client_errors_say_what_was_wrong() {
    let api = ApiError::from(KeyError::Empty(crate::key::KeyPart::Session));
    assert_eq!(api.status(), StatusCode::BAD_REQUEST);
    assert!(api.public_message().contains("session id is empty"));
    let storage = ApiError::from(Error::Storage(Arc::new(StoreError::InvalidRequest(
        "bad cursor".into(),
    ))));
    assert_eq!(storage.status(), StatusCode::BAD_REQUEST);
}

#[test]
fn a_failed_turn_says_whether_its_session_kept_it() {
    let unavailable = || StoreError::Unavailable {
        backend: "redis",
        detail: "connection refused".into(),
    };
    // The store's answer to the turn's write was lost: stored or not, nobody knows yet.
    let ran = ApiError::from(Error::store(&key(), unavailable())).of_turn();
    assert_eq!(
        (ran.code(), ran.kept()),
        ("store_unavailable", Some(Kept::Unknown))
    );
    let body = ran.body();
    assert!(
        body["error"]
            .get("kept")
            .is_some_and(serde_json::Value::is_null),
        "{body}"
    );
    assert!(ran.public_message().contains("not known yet"));

    // A write the store refused stored nothing.
    let conflict = StoreError::Conflict {
        key: key(),
        expected: 2,
        found: 3,
    };
    let refused = ApiError::from(Error::store(&key(), conflict)).of_turn();
    assert_eq!(
        (refused.code(), refused.kept()),
        ("conflict", Some(Kept::No))
    );
    assert_eq!(refused.body()["error"]["kept"], false);

    let not_loaded = ApiError::from(Error::Activation {
        key: key(),
        source: Arc::new(unavailable()),
    })
    .of_turn();
    assert_eq!(not_loaded.kept(), Some(Kept::No));
    assert_eq!(not_loaded.body()["error"]["kept"], false);
    assert!(not_loaded
        .public_message()
        .contains("nothing of this turn ran"));

    let fenced = StoreError::Fenced {
        key: key(),
        epoch: 1,
        current: 2,
    };
    let fenced = ApiError::from(Error::store(&key(), fenced)).of_turn();
    assert_eq!((fenced.code(), fenced.kept()), ("fenced", Some(Kept::No)));

    let listing = ApiError::from(Error::storage(unavailable()));
    assert_eq!(listing.kept(), None);
    assert!(listing.body()["error"].get("kept").is_none());

    // A read or a fork that found the store down ran no turn: nothing to keep.
    let read = ApiError::from(Error::store(&key(), unavailable()));
    assert_eq!((read.code(), read.kept()), ("store_unavailable", None));
    assert!(read.public_message().contains("nothing was changed"));
}

/// A turn stored on the primary but not confirmed by enough replicas is 503 `not_replicated`,
/// kept, and its body says it is stored and must not be sent again as a new turn.
#[test]
fn a_turn_short_of_replicas_is_503_not_replicated_and_kept() {
    let short = StoreError::NotReplicated {
        key: key(),
        version: 7,
        acked: 0,
        wanted: 1,
        timeout: Duration::from_millis(500),
    };
    let error = Error::store(&key(), short);
    assert_eq!(error.code(), "not_replicated");
    let shown = error.to_string();
    assert!(
        shown.contains("not acknowledged") && shown.contains("stored on the primary as version 7"),
        "{shown}"
    );
    let api = ApiError::from(error).of_turn();
    assert_eq!(
        (api.status().as_u16(), api.code(), api.kept()),
        (503, "not_replicated", Some(Kept::Yes))
    );
    let body = api.body();
    assert_eq!(body["error"]["kept"], true);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("stored on the primary") && message.contains("Idempotency-Key"),
        "{message}"
    );
    assert!(!message.contains("u/s"), "no store wording: {message}");
    assert_eq!(api.retry_after(), Some(Duration::from_secs(1)));
}
