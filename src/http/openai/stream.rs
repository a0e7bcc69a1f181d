//! A streamed response as server-sent events: each of the library's typed events
//! ([`ResponseEvents`]) as one event named by its type.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::responses::{ResponseEvent, ResponseEvents};

/// The response's events as server-sent events. The request timeout bounds the wait for each
/// next event (as on `POST …/turns`): a reply that keeps streaming is never cut; one silent for
/// the whole timeout ends with `response.failed` (`timeout`), and the response goes on (a
/// retrieve finds it).
pub(crate) fn response_events(events: ResponseEvents, timeout: Duration) -> Response {
    let stream = futures::stream::unfold(Some(events), move |events| async move {
        let mut events = events?;
        let next = tokio::time::timeout(timeout, events.next()).await;
        let (event, rest) = match next {
            Ok(Some(ResponseEvent::Failed(error))) => {
                let body = ApiError::from(error).of_turn().body();
                let (code, message) = (&body["error"]["code"], &body["error"]["message"]);
                let failed = events.failure(
                    code.as_str().unwrap_or("internal"),
                    message.as_str().unwrap_or_default(),
                );
                (failed, None)
            }
            Ok(Some(event)) => (event, Some(events)),
            Ok(None) => return None,
            Err(_) => {
                let body = ApiError::Timeout {
                    after: timeout,
                    interrupted: false,
                }
                .body();
                let message = body["error"]["message"].as_str().unwrap_or_default();
                (events.failure("timeout", message), None)
            }
        };
        let sent = match event {
            ResponseEvent::Typed { kind, data } => Event::default()
                .event(kind)
                .json_data(&data)
                .unwrap_or_else(|_| Event::default().event(kind)),
            // Answered above, by `failure`.
            ResponseEvent::Failed(_) => return None,
        };
        Some((Ok::<_, Infallible>(sent), rest))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
