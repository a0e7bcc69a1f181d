//! A streamed response as server-sent events: each of the library's typed events
//! ([`ResponseEvents`]) as one event named by its type, `event: TYPE` and one `data:` line.
//!
//! Written here rather than through axum's `Sse`, for what a response's events need: events
//! made together (the two that open a response, the six that close it) go out in one body
//! chunk, and an event's data — one line of compact JSON, which never holds a line break — is
//! copied once, not scanned for line breaks and copied again.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::responses::{ResponseEvent, ResponseEvents};

/// How long the stream may stay silent before a comment line keeps the connection alive, as
/// axum's own event streams do.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Appends one event to `frame`.
fn write_event(frame: &mut Vec<u8>, kind: &str, data: &str) {
    frame.reserve(kind.len() + data.len() + 16);
    frame.extend_from_slice(b"event: ");
    frame.extend_from_slice(kind.as_bytes());
    frame.extend_from_slice(b"\ndata: ");
    frame.extend_from_slice(data.as_bytes());
    frame.extend_from_slice(b"\n\n");
}

/// Appends `event` to `frame`; returns whether it was the last.
fn write(frame: &mut Vec<u8>, events: &mut ResponseEvents, event: ResponseEvent) -> bool {
    match event {
        ResponseEvent::Typed { kind, data } => {
            write_event(frame, kind, &data);
            false
        }
        ResponseEvent::Failed(error) => {
            let body = ApiError::from(error).of_turn().body();
            let (code, message) = (&body["error"]["code"], &body["error"]["message"]);
            let failed = events.failure(
                code.as_str().unwrap_or("internal"),
                message.as_str().unwrap_or_default(),
            );
            if let ResponseEvent::Typed { kind, data } = failed {
                write_event(frame, kind, &data);
            }
            true
        }
    }
}

/// Where the stream stands between two chunks.
struct State {
    events: ResponseEvents,
    /// How long the stream has been silent.
    silent: Duration,
}

/// The response's events as server-sent events. The request timeout bounds the wait for each
/// next event (as on `POST …/turns`): a reply that keeps streaming is never cut; one silent for
/// the whole timeout ends with `response.failed` (`timeout`), and the response goes on (a
/// retrieve finds it).
pub(crate) fn response_events(events: ResponseEvents, timeout: Duration) -> Response {
    let start = State {
        events,
        silent: Duration::ZERO,
    };
    let chunks = futures::stream::unfold(Some(start), move |state| async move {
        let State { mut events, silent } = state?;
        let wait = KEEP_ALIVE.min(timeout.saturating_sub(silent));
        let mut frame = Vec::new();
        let last = match tokio::time::timeout(wait, events.next()).await {
            Ok(Some(event)) => {
                let mut last = write(&mut frame, &mut events, event);
                // What is ready now goes in the same chunk.
                while !last {
                    let Some(event) = events.ready() else { break };
                    last = write(&mut frame, &mut events, event);
                }
                last
            }
            Ok(None) => return None,
            Err(_) if silent + wait < timeout => {
                let next = State {
                    events,
                    silent: silent + wait,
                };
                return Some((
                    Ok::<_, Infallible>(Bytes::from_static(b":\n\n")),
                    Some(next),
                ));
            }
            Err(_) => {
                let body = ApiError::Timeout {
                    after: timeout,
                    interrupted: false,
                }
                .body();
                let message = body["error"]["message"].as_str().unwrap_or_default();
                if let ResponseEvent::Typed { kind, data } = events.failure("timeout", message) {
                    write_event(&mut frame, kind, &data);
                }
                true
            }
        };
        let next = (!last).then_some(State {
            events,
            silent: Duration::ZERO,
        });
        Some((Ok(Bytes::from(frame)), next))
    });
    let mut response = Body::from_stream(chunks).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_name_and_one_data_line() {
        let mut frame = Vec::new();
        write_event(
            &mut frame,
            "response.created",
            r#"{"type":"response.created"}"#,
        );
        write_event(&mut frame, "response.in_progress", "{}");
        assert_eq!(
            String::from_utf8(frame).unwrap(),
            "event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
             event: response.in_progress\ndata: {}\n\n"
        );
    }
}
