//! What the servers answer, read: outcomes as acknowledgements, error bodies as the report's
//! failure reasons, and the probe's refusals as messages that say what to fix.

use reqwest::{Response, StatusCode};

use crate::cli::answer_body::{body_of, MAX_ANSWER_BYTES};
use serde::Deserialize;

use super::super::target::{Ack, AckKind, Failure};

/// A turn's answer body, and the `outcome` event's data.
#[derive(Debug, Deserialize)]
struct OutcomeBody {
    outcome: String,
    seq: u64,
}

/// An error body: `{"error": {"code", "message"}}`.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

/// The part of an error body a client acts on.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorDetail {
    /// The documented code, such as `busy`.
    #[serde(default)]
    pub code: String,
    /// What happened, for a person.
    #[serde(default)]
    pub message: String,
}

/// A 200 answer (or `outcome` event) as the ledger records it.
pub(super) fn acknowledge(body: &[u8]) -> Result<Ack, Failure> {
    let outcome: OutcomeBody = serde_json::from_slice(body).map_err(|_| Failure::Other)?;
    let kind = match outcome.outcome.as_str() {
        "completed" | "incomplete" | "refused" => AckKind::Completed,
        "interrupted" => AckKind::Interrupted,
        "superseded" => AckKind::Superseded,
        "merged" => AckKind::Merged,
        _ => return Err(Failure::Other),
    };
    Ok(Ack {
        seq: outcome.seq,
        kind,
    })
}

pub(super) async fn failure_of_response(response: Response) -> Failure {
    let status = response.status();
    let body = body_of(response, MAX_ANSWER_BYTES)
        .await
        .unwrap_or_default();
    failure_of(Some(status), &error_of(&body).code)
}

pub(super) fn error_of(body: &[u8]) -> ErrorDetail {
    serde_json::from_slice::<ErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_default()
}

/// Sorts an error answer into a report column, by its code (`docs/http-api.md`, "Errors"),
/// else by its status.
pub(super) fn failure_of(status: Option<StatusCode>, code: &str) -> Failure {
    match code {
        "busy" => Failure::Busy,
        "overloaded" => Failure::Overloaded,
        "at_capacity" => Failure::AtCapacity,
        "concurrency_limit_exceeded" => Failure::ConcurrencyLimit,
        "draining" => Failure::Draining,
        "store_unavailable" | "conflict" | "not_owner" | "fenced" | "not_replicated" => {
            Failure::Store
        }
        // A failed turn, by what failed: the agent or the model behind it.
        "agent_failed" | "model_rate_limited" | "model_unavailable" | "model_timeout"
        | "model_refused" | "model_malformed" => Failure::Agent,
        _ => match status.map(|s| s.as_u16()) {
            Some(429) => Failure::Overloaded,
            _ => Failure::Other,
        },
    }
}

/// Why the probe could not reach `base`.
pub(super) fn unreachable(base: &str, err: &reqwest::Error) -> String {
    let why = if err.is_connect() {
        "the connection was refused or not made within 2 s"
    } else if err.is_timeout() {
        "no answer in time"
    } else {
        "the request failed"
    };
    format!("cannot reach --target {base}: {why} ({err}); is `turnstile serve` running there?")
}

/// The probe's authenticated read: anything but a 200 is a clear error.
pub(super) async fn refused_read(base: &str, response: Response) -> Result<(), String> {
    let status = response.status();
    if status == StatusCode::OK {
        return Ok(());
    }
    let body = body_of(response, MAX_ANSWER_BYTES)
        .await
        .unwrap_or_default();
    let detail = error_of(&body);
    Err(match status.as_u16() {
        401 => format!(
            "{base} refused the token (401 {}): pass an admin token of that server with --token",
            detail.code
        ),
        403 => format!(
            "{base} answered 403 forbidden: the token reaches only its own user's sessions, and \
             turnstile load writes and reads back sessions of 1,000 users; pass an admin token"
        ),
        404 => format!(
            "{base} has no session events route (404): is it a turnstile serve of this version?"
        ),
        _ => format!(
            "{base} answered {status} to a read of a session's events: {} {}",
            detail.code, detail.message
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_the_reports_failure_reasons() {
        let status = |s: u16| Some(StatusCode::from_u16(s).unwrap());
        for (code, s, failure) in [
            ("busy", 409, Failure::Busy),
            ("overloaded", 429, Failure::Overloaded),
            ("at_capacity", 429, Failure::AtCapacity),
            ("concurrency_limit_exceeded", 429, Failure::ConcurrencyLimit),
            ("draining", 503, Failure::Draining),
            ("store_unavailable", 503, Failure::Store),
            ("conflict", 409, Failure::Store),
            ("fenced", 503, Failure::Store),
            ("not_replicated", 503, Failure::Store),
            ("agent_failed", 502, Failure::Agent),
            ("timeout", 504, Failure::Other),
            ("owner_unreachable", 503, Failure::Other),
            ("", 429, Failure::Overloaded),
            ("", 500, Failure::Other),
        ] {
            assert_eq!(failure_of(status(s), code), failure, "{code} {s}");
        }
        assert_eq!(failure_of(None, "agent_failed"), Failure::Agent);
        for code in ["model_rate_limited", "model_timeout", "model_malformed"] {
            assert_eq!(failure_of(None, code), Failure::Agent, "{code}");
        }
    }

    #[test]
    fn outcomes_become_acks() {
        let ack = acknowledge(br#"{"outcome":"merged","output":"x","seq":7}"#).unwrap();
        assert_eq!(
            ack,
            Ack {
                seq: 7,
                kind: AckKind::Merged
            }
        );
        assert_eq!(acknowledge(b"{}"), Err(Failure::Other));
        assert_eq!(
            acknowledge(br#"{"outcome":"exploded","seq":1}"#),
            Err(Failure::Other)
        );
    }
}
