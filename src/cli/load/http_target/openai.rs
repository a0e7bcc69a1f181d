//! `--api openai`: the load's turns as OpenAI responses. Each session of the run is one
//! conversation, made (`POST /v1/conversations`, for the session's user) before the clock
//! starts; each turn is `POST /v1/responses` in it, streamed when the run streams (`--stream`,
//! or turns sent as soon as the previous one is queued) and a response object otherwise. The
//! response events are read as the turnstile route's: the first `response.output_text.delta`
//! is the first chunk, and `response.completed`/`response.incomplete` (or the object) carry the
//! answer's place in the log (`turnstile.seq`). The verification reads the conversation's session back through the
//! turnstile routes, where it is the same session.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Client, Response, StatusCode};
use serde_json::Value;
use tokio::sync::oneshot;
use turnstile::http::USER_HEADER;
use turnstile::SessionKey;

use super::super::target::{Ack, AckKind, Failure};
use super::answers::{error_of, failure_of, unreachable};
use crate::cli::answer_body::{body_of, MAX_ANSWER_BYTES};
use crate::cli::sse::SseReader;

/// Conversations made at once before the run: enough to keep a server's cores busy, few enough
/// that the opening is not a burst of connections a small `--max-connections` would refuse.
const OPENING_CONCURRENCY: usize = 32;
/// How many times a conversation's creation is sent again after a broken connection or a
/// retryable refusal (429, 503): safe, since its `Idempotency-Key` names the same conversation.
const OPENING_RESENDS: usize = 3;

/// The conversation a session of the run is, by its key.
pub(super) type Conversations = HashMap<SessionKey, SessionKey>;

/// Makes one conversation per key at `base_of(key)`, each with an `Idempotency-Key` of the run
/// so that a resent request gets the same one; answers the map key → the conversation's
/// session (same user, the conversation's id).
pub(super) async fn open(
    client: &Client,
    keys: &[SessionKey],
    base_of: impl Fn(&SessionKey) -> String,
    authorize: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    run_id: &str,
) -> Result<Conversations, String> {
    let requests = keys.iter().map(|key| {
        let base = base_of(key);
        let request = authorize(client.post(format!("{base}/v1/conversations")))
            .header(USER_HEADER, key.user_id())
            .header(
                "idempotency-key",
                format!("load-{run_id}-{}", key.session_id()),
            )
            .json(&serde_json::json!({}))
            .timeout(super::REQUEST_TIMEOUT);
        async move {
            let mut resends = 0;
            let response = loop {
                let attempt = request
                    .try_clone()
                    .ok_or_else(|| "a conversation's creation cannot be sent again".to_owned())?;
                match attempt.send().await {
                    Ok(response)
                        if resends < OPENING_RESENDS
                            && matches!(response.status().as_u16(), 429 | 503) => {}
                    Ok(response) => break response,
                    Err(e) if resends < OPENING_RESENDS && (e.is_connect() || e.is_request()) => {}
                    Err(e) => return Err(unreachable(&base, &e)),
                }
                resends += 1;
                // Backing off (0.2, 0.4, 0.8 s) before asking a busy server again.
                tokio::time::sleep(Duration::from_millis(100 << resends)).await;
            };
            let status = response.status();
            let body = body_of(response, MAX_ANSWER_BYTES)
                .await
                .map_err(|e| format!("{base}/v1/conversations: {e}"))?;
            if status != StatusCode::OK {
                let detail = error_of(&body);
                return Err(format!(
                    "{base}/v1/conversations answered {status} {} {}: --api openai needs a \
                     server with the OpenAI routes and an admin token (it acts for the run's \
                     users with {USER_HEADER})",
                    detail.code, detail.message
                ));
            }
            let id = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["id"].as_str().map(str::to_owned))
                .ok_or_else(|| format!("{base}/v1/conversations answered without an id"))?;
            let conversation = SessionKey::new(key.user_id(), id)
                .map_err(|e| format!("{base} made a conversation id that is no session id: {e}"))?;
            Ok((key.clone(), conversation))
        }
    });
    futures::stream::iter(requests)
        .buffer_unordered(OPENING_CONCURRENCY)
        .collect::<Vec<Result<_, String>>>()
        .await
        .into_iter()
        .collect()
}

/// The body of one turn's `POST /v1/responses`, streamed or not.
pub(super) fn response_body(conversation: &SessionKey, input: &str, stream: bool) -> String {
    serde_json::json!({
        "conversation": conversation.session_id(),
        "input": input,
        "stream": stream,
    })
    .to_string()
}

/// A response object (not streamed) as the ledger records it.
pub(super) fn acknowledge_object(body: &[u8]) -> Result<Ack, Failure> {
    let object: Ended = serde_json::from_slice(body).map_err(|_| Failure::Other)?;
    object.ack()
}

/// Reads a response's events: times its first delta, and acknowledges its end.
pub(super) async fn read_events(
    response: Response,
    mut first_chunk: Option<oneshot::Sender<()>>,
) -> Result<Ack, Failure> {
    let mut body = response.bytes_stream();
    let mut reader = SseReader::default();
    while let Some(bytes) = body.next().await {
        let bytes = bytes.map_err(|_| Failure::Other)?;
        for event in reader.push(&bytes).map_err(|_| Failure::Other)? {
            match event.name.as_str() {
                "response.output_text.delta" => {
                    if let Some(signal) = first_chunk.take() {
                        let _ = signal.send(());
                    }
                }
                "response.completed" | "response.incomplete" | "response.failed" => {
                    return acknowledge(event.data.as_bytes());
                }
                // A failure of the request itself, or of forwarding it.
                "error" => {
                    let detail = error_of(event.data.as_bytes());
                    return Err(failure_of(None, &detail.code));
                }
                _ => {}
            }
        }
    }
    // The stream ended without its last event: the connection broke.
    Err(Failure::Other)
}

/// A response's last event as the ledger records it: completed or incomplete with the seq of
/// its answer (`turnstile.seq`), or the failure its error names.
fn acknowledge(data: &[u8]) -> Result<Ack, Failure> {
    let event: LastEvent = serde_json::from_slice(data).map_err(|_| Failure::Other)?;
    event.response.ack()
}

/// The fields of a response's last event the ledger reads (the rest is skipped, not kept).
#[derive(serde::Deserialize)]
struct LastEvent {
    response: Ended,
}

/// The fields of a finished response object the ledger reads.
#[derive(serde::Deserialize)]
struct Ended {
    #[serde(default)]
    status: String,
    #[serde(default)]
    incomplete_details: Option<Reason>,
    #[serde(default)]
    error: Option<Code>,
    #[serde(default)]
    turnstile: Option<Place>,
}

#[derive(serde::Deserialize)]
struct Reason {
    #[serde(default)]
    reason: String,
}

#[derive(serde::Deserialize)]
struct Code {
    #[serde(default)]
    code: String,
}

#[derive(serde::Deserialize)]
struct Place {
    seq: Option<u64>,
}

impl Ended {
    /// Completed or incomplete with the seq of its answer, or the failure its error names.
    fn ack(&self) -> Result<Ack, Failure> {
        let why = self.incomplete_details.as_ref().map(|d| d.reason.as_str());
        let superseded = why == Some("superseded");
        // The model's own short ending: its turn ran to the end.
        let model_ended = matches!(why, Some("max_output_tokens" | "content_filter"));
        let kind = match self.status.as_str() {
            "completed" => AckKind::Completed,
            "incomplete" if model_ended => AckKind::Completed,
            // A superseded message never ran: its seq is its own input's.
            "incomplete" if superseded => AckKind::Superseded,
            "incomplete" | "cancelled" => AckKind::Interrupted,
            "failed" => {
                let code = self.error.as_ref().map_or("", |e| e.code.as_str());
                return Err(failure_of(None, code));
            }
            _ => return Err(Failure::Other),
        };
        let seq = self
            .turnstile
            .as_ref()
            .and_then(|t| t.seq)
            .ok_or(Failure::Other)?;
        Ok(Ack { seq, kind })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn last(status: &str, turnstile: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"type": "x", "response": {"status": status,
            "turnstile": turnstile, "error": {"code": "model_timeout"}}}))
        .unwrap()
    }

    #[test]
    fn a_responses_last_event_is_its_acknowledgement() {
        let at = json!({"seq": 42});
        let ack = acknowledge(&last("completed", at.clone())).unwrap();
        assert_eq!((ack.seq, ack.kind), (42, AckKind::Completed));
        let ack = acknowledge(&last("incomplete", at.clone())).unwrap();
        assert_eq!(ack.kind, AckKind::Interrupted);
        let superseded = serde_json::to_vec(&json!({"response": {"status": "incomplete",
            "incomplete_details": {"reason": "superseded"}, "turnstile": at}}))
        .unwrap();
        assert_eq!(acknowledge(&superseded).unwrap().kind, AckKind::Superseded);
        assert!(matches!(
            acknowledge(&last("failed", Value::Null)),
            Err(Failure::Agent)
        ));
        assert!(
            acknowledge(&last("completed", Value::Null)).is_err(),
            "no seq to verify"
        );
    }
}
