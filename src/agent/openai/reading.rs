//! Reading one response's stream: its server-sent events decoded into chunks, text emitted to
//! the turn as it comes, the server's own in-stream errors told apart from a malformed stream,
//! and what follows `[DONE]` drained so that the connection is reused.

use std::time::Duration;

use futures::StreamExt;

use super::sse::{SseDecoder, SseError};
use super::transport::transport_detail;
use super::wire::{self, Chunk};
use super::{error, Ended, OpenAiAgent, OpenAiError};
use crate::agent::TurnContext;

/// How long the end of a body is waited for after `[DONE]`: servers send it in the same breath.
const DRAIN_WAIT: Duration = Duration::from_millis(100);
/// The most bytes read after `[DONE]`; a server that goes on talking loses its connection.
const DRAIN_BYTES: usize = 16 * 1024;

impl OpenAiAgent {
    /// Reads one response's stream, emitting its text as it comes.
    pub(super) async fn read_round(
        &self,
        turn: &TurnContext,
        response: reqwest::Response,
    ) -> Result<Ended, OpenAiError> {
        let cancel = turn.cancellation();
        let url = &self.transport.shown;
        let secrets = &self.transport.secrets;
        let malformed = |detail: String| OpenAiError::Malformed {
            url: url.clone(),
            detail: secrets.scrub(&detail),
        };
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        let mut round = wire::Round::default();
        // Measured from the last event with data: keep-alive comments are not progress.
        let mut deadline = tokio::time::Instant::now() + self.transport.timeout;
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Ended::Cancelled),
                next = tokio::time::timeout_at(deadline, body.next()) => next,
            };
            let ended = matches!(next, Ok(None));
            let events = match next {
                Err(_) => {
                    return Err(OpenAiError::Timeout {
                        url: url.clone(),
                        after: self.transport.timeout,
                    })
                }
                Ok(None) => decoder.finish().into_iter().collect(),
                Ok(Some(Err(error))) => {
                    return Err(OpenAiError::Broken {
                        url: url.clone(),
                        detail: secrets.scrub(&transport_detail(error)),
                    })
                }
                Ok(Some(Ok(ref bytes))) => decoder.push(bytes).map_err(|e| {
                    malformed(match e {
                        SseError::TooLarge => "an event larger than a megabyte".into(),
                        SseError::NotUtf8 => "a line that is not UTF-8".into(),
                    })
                })?,
            };
            if !events.is_empty() {
                deadline = tokio::time::Instant::now() + self.transport.timeout;
            }
            for data in events {
                if data.trim() == "[DONE]" {
                    if !ended {
                        drain(body).await;
                    }
                    return Ok(Ended::Done(round));
                }
                let chunk: Chunk = serde_json::from_str(&data).map_err(|e| {
                    malformed(format!("a chunk that is not chat-completions JSON ({e})"))
                })?;
                if let Some(error) = &chunk.error {
                    // The server's own failure, told in the stream: not a malformed stream.
                    return Err(OpenAiError::InStream {
                        url: url.clone(),
                        kind: error::in_stream_kind(error),
                        detail: error::detail(&error.to_string(), secrets),
                    });
                }
                let added = round.apply(chunk).map_err(malformed)?;
                if !added.is_empty() {
                    turn.emit(added).await;
                }
            }
            if ended {
                // Some servers close without `[DONE]`; a finish reason says the answer is whole.
                return match round.finished {
                    true => Ok(Ended::Done(round)),
                    false => Err(malformed("the stream ended before the answer did".into())),
                };
            }
        }
    }
}

/// Reads what is left of a finished response (usually just the end of its chunked encoding), so
/// that its connection goes back to the pool instead of being closed: dropping a body half-read
/// costs the next request a new connection.
async fn drain(
    mut body: impl futures::Stream<Item = reqwest::Result<tokio_util::bytes::Bytes>> + Unpin,
) {
    let read = async {
        let mut seen = 0;
        while let Some(Ok(bytes)) = body.next().await {
            seen += bytes.len();
            if seen > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_WAIT, read).await;
}
