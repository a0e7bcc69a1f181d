//! Answering a turn: one JSON body, or server-sent events (`chunk`… then `outcome`).
//!
//! The request timeout bounds how long the caller waits, not the turn: when it expires the
//! turn goes on (its outcome lands in the history) unless the request set
//! `cancel_on_timeout`, which ties the turn to the request — a timeout or a disconnect then
//! interrupts it.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use super::auth::Caller;
use super::error::ApiError;
use super::gateway::Gateway;
use crate::channel::{ChannelMessage, ChannelRoute};
use crate::key::SessionKey;
use crate::state::{IncompleteReason, InterruptReason};
use crate::{CallOptions, Outcome, OutcomeKind, OverlapPolicy};
use crate::{StreamEvent, TurnStream};

/// Where a turn goes.
pub(crate) enum Target {
    /// A session named in the path, and the input.
    Session(SessionKey, String),
    /// A channel message, routed by the gateway's [`crate::channel::ChannelRouter`].
    Channel(ChannelMessage),
}

/// What the request asked for besides its input.
pub(crate) struct TurnArgs {
    pub policy: Option<OverlapPolicy>,
    pub cancel_on_timeout: bool,
    /// The `Idempotency-Key` header: the message's request id.
    pub request_id: Option<String>,
}

/// The `Idempotency-Key` header, if the request has one. A value that is not visible ASCII is
/// passed on as it is, so that the runtime refuses it with its own message.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// The `Idempotency-Key` header, checked as the runtime checks a request id: for routes that
/// use it before the runtime sees it (or never pass it on), such as the ids of a conversation
/// or a response made from it.
pub(crate) fn checked_idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let key = idempotency_key(headers);
    if let Some(key) = &key {
        crate::check_request_id(key)
            .map_err(|why| ApiError::BadRequest(format!("Idempotency-Key: {why}")))?;
    }
    Ok(key)
}

/// The JSON form of an outcome: `{"outcome", "output", "seq"}`, plus `reason` when interrupted
/// and, for channel messages, where the message went.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct OutcomeBody {
    /// `completed`, `interrupted`, `incomplete`, `refused`, `superseded` or `merged`.
    #[schema(value_type = String)]
    outcome: &'static str,
    /// Why the turn was interrupted, or why its reply is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<OutcomeReason>,
    /// The reply (what was streamed, when interrupted).
    output: String,
    /// The seq of the event that answers the message.
    seq: u64,
    /// A channel message's session.
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<SessionRef>,
    /// A channel message's user, shown to admins and that user.
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    /// Whether the channel account is paired with a user.
    #[serde(skip_serializing_if = "Option::is_none")]
    paired: Option<bool>,
}

/// Why a turn ended as it did: an interrupted one's reason, or an incomplete one's.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
enum OutcomeReason {
    Interrupted(InterruptReason),
    Incomplete(IncompleteReason),
}

/// A session, by its ids.
#[derive(Debug, Serialize, utoipa::ToSchema)]
struct SessionRef {
    user: String,
    session: String,
}

impl OutcomeBody {
    /// The body of `outcome`. For a channel message, `show_user` says whether the caller may
    /// see whom the sender is paired to: an admin, or that user's own token. Anyone else could
    /// otherwise post as a channel account to look its pairing up.
    pub(super) fn of(outcome: Outcome, route: Option<&ChannelRoute>, show_user: bool) -> Self {
        let reason = match outcome.kind {
            OutcomeKind::Interrupted(reason) => Some(OutcomeReason::Interrupted(reason)),
            OutcomeKind::Incomplete(reason) => Some(OutcomeReason::Incomplete(reason)),
            _ => None,
        };
        Self {
            outcome: outcome.kind.as_str(),
            reason,
            output: outcome.output,
            seq: outcome.seq,
            session: route.map(|r| SessionRef {
                user: r.key.user_id().to_owned(),
                session: r.key.session_id().to_owned(),
            }),
            user: route.filter(|_| show_user).map(|r| r.user.clone()),
            paired: route.filter(|_| show_user).map(|r| r.paired),
        }
    }
}

/// Whether the client asked for server-sent events.
pub(crate) fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|kind| kind.trim().starts_with("text/event-stream"))
}

/// Runs the turn and answers it as JSON or as events; a failure says whether the session kept
/// the turn.
pub(crate) async fn answer(
    gateway: &Gateway,
    caller: &Caller,
    target: Target,
    args: TurnArgs,
    events: bool,
) -> Result<Response, ApiError> {
    run_turn(gateway, caller, target, args, events)
        .await
        .map_err(ApiError::of_turn)
}

async fn run_turn(
    gateway: &Gateway,
    caller: &Caller,
    target: Target,
    args: TurnArgs,
    events: bool,
) -> Result<Response, ApiError> {
    let shows_user =
        |route: &ChannelRoute| caller.is_admin() || caller.require_user(&route.user).is_ok();
    let timeout = gateway.config().request_timeout;
    let mut options = CallOptions {
        policy: args.policy,
        request_id: args.request_id,
        ..CallOptions::default()
    };
    // A stream is needed to tie the turn to the request, and for events.
    if events || args.cancel_on_timeout {
        if args.cancel_on_timeout {
            options = options.with_cancel_on_drop();
        }
        let rejects = effective_policy(gateway, &target, args.policy) == OverlapPolicy::Reject;
        let (route, mut stream) = start_stream(gateway, target, options).await?;
        let show_user = route.as_ref().is_some_and(shows_user);
        if events {
            // Under `reject` the answer is `Busy` at once or the turn runs at once: its first
            // event decides, so that a refusal is the documented 409 before any stream begins.
            let first = if rejects {
                match within(timeout, args.cancel_on_timeout, stream.next()).await? {
                    Some(StreamEvent::Outcome(Err(error))) => return Err(error.into()),
                    first => first,
                }
            } else {
                None
            };
            return Ok(event_stream(
                stream,
                first,
                route,
                show_user,
                timeout,
                args.cancel_on_timeout,
            ));
        }
        let outcome = within(timeout, true, stream.outcome()).await??;
        return Ok(Json(OutcomeBody::of(outcome, route.as_ref(), show_user)).into_response());
    }
    // The call runs on its own task: a timeout or a disconnect ends the wait, never the turn,
    // even while the call still waits for a free slot (`capacity_wait`) and is not yet queued.
    let body = match target {
        Target::Session(key, input) => {
            let runtime = gateway.runtime().clone();
            let call = tokio::spawn(async move { runtime.call_with(&key, input, options).await });
            OutcomeBody::of(
                within(timeout, false, call).await?.map_err(lost)??,
                None,
                false,
            )
        }
        Target::Channel(message) => {
            let channels = gateway.channels().clone();
            let send = tokio::spawn(async move { channels.send_with(message, options).await });
            let reply = within(timeout, false, send).await?.map_err(lost)??;
            let show_user = shows_user(&reply.route);
            OutcomeBody::of(reply.outcome, Some(&reply.route), show_user)
        }
    };
    Ok(Json(body).into_response())
}

/// The policy a message will meet: its own, else the channel router's or the runtime's default.
fn effective_policy(
    gateway: &Gateway,
    target: &Target,
    asked: Option<OverlapPolicy>,
) -> OverlapPolicy {
    asked.unwrap_or_else(|| match target {
        Target::Session(..) => gateway.runtime().config().default_policy,
        Target::Channel(_) => gateway.channels().policy(),
    })
}

/// A turn's task panicked or was cancelled (the runtime catches agent panics, so this is a bug).
fn lost(error: tokio::task::JoinError) -> ApiError {
    ApiError::Internal(format!("the turn's task ended without an answer: {error}"))
}

async fn start_stream(
    gateway: &Gateway,
    target: Target,
    options: CallOptions,
) -> Result<(Option<ChannelRoute>, TurnStream), ApiError> {
    match target {
        Target::Session(key, input) => {
            let stream = gateway
                .runtime()
                .call_streaming(&key, input, options)
                .await?;
            Ok((None, stream))
        }
        Target::Channel(message) => {
            let (route, stream) = gateway.channels().send_streaming(message, options).await?;
            Ok((Some(route), stream))
        }
    }
}

/// Awaits `work` for at most `after`; dropping it on expiry is what interrupts a turn tied to
/// the request (and leaves one that is not).
pub(crate) async fn within<T>(
    after: Duration,
    interrupted: bool,
    work: impl Future<Output = T>,
) -> Result<T, ApiError> {
    tokio::time::timeout(after, work)
        .await
        .map_err(|_| ApiError::Timeout { after, interrupted })
}

/// The turn as server-sent events. The request timeout bounds the wait for each next event,
/// not the whole stream: a long reply that keeps streaming is never cut, while one that goes
/// silent for the whole timeout ends with an `error` event (and is interrupted only when the
/// request set `cancel_on_timeout`).
fn event_stream(
    stream: TurnStream,
    first: Option<StreamEvent>,
    route: Option<ChannelRoute>,
    show_user: bool,
    timeout: Duration,
    cancel: bool,
) -> Response {
    let events = futures::stream::unfold(Some((stream, route, first)), move |state| async move {
        let (mut stream, route, mut first) = state?;
        let next = loop {
            let next = match first.take() {
                Some(event) => Ok(Some(event)),
                None => tokio::time::timeout_at(Instant::now() + timeout, stream.next()).await,
            };
            // Tool calls are not part of this route's events: the turn's record has them.
            if !matches!(
                next,
                Ok(Some(
                    StreamEvent::ToolCall { .. } | StreamEvent::ToolResult { .. }
                ))
            ) {
                break next;
            }
        };
        let (event, rest) = match next {
            Ok(Some(StreamEvent::Chunk(text))) => (
                json_event("chunk", &json!({"text": text})),
                Some((stream, route, None)),
            ),
            Ok(Some(StreamEvent::Outcome(Ok(outcome)))) => {
                let body = OutcomeBody::of(outcome, route.as_ref(), show_user);
                (json_event("outcome", &body), None)
            }
            Ok(Some(StreamEvent::Outcome(Err(e)))) => {
                (error_event(&ApiError::from(e).of_turn()), None)
            }
            Ok(Some(_)) | Ok(None) => return None,
            // `stream` is dropped here, which interrupts the turn when it is tied to us.
            Err(_) => (
                error_event(&ApiError::Timeout {
                    after: timeout,
                    interrupted: cancel,
                }),
                None,
            ),
        };
        Some((Ok::<_, Infallible>(event), rest))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn json_event(name: &'static str, data: &impl Serialize) -> Event {
    match Event::default().event(name).json_data(data) {
        Ok(event) => event,
        Err(e) => error_event(&ApiError::BadRequest(format!("unencodable event: {e}"))),
    }
}

fn error_event(error: &ApiError) -> Event {
    // The body is a JSON value, so it always encodes; the fallback only keeps this total.
    Event::default()
        .event("error")
        .json_data(error.body())
        .unwrap_or_else(|_| Event::default().event("error"))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn event_streams_are_chosen_by_the_accept_header() {
        let mut headers = HeaderMap::new();
        assert!(!wants_events(&headers));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        assert!(!wants_events(&headers));
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(wants_events(&headers));
    }

    #[test]
    fn outcomes_serialise_as_documented() {
        let outcome = Outcome {
            kind: OutcomeKind::Interrupted(InterruptReason::Requested),
            output: "par".into(),
            seq: 4,
            usage: None,
            calls: Vec::new(),
        };
        let value = serde_json::to_value(OutcomeBody::of(outcome, None, false)).unwrap();
        assert_eq!(
            value,
            json!({"outcome": "interrupted", "reason": "requested", "output": "par", "seq": 4})
        );
    }
}
