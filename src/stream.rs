//! Streamed turns: the chunks an agent emits, then the outcome.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use serde_json::Value;

use crate::call::{Outcome, Streamed};
use crate::error::{Error, Result};
use crate::key::SessionKey;

/// One item of a [`TurnStream`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StreamEvent {
    /// A piece of output, as the agent emitted it.
    Chunk(String),
    /// The agent called a tool. Streamed at the agent's next chunk, or when it flushes
    /// ([`crate::TurnContext::flush`]); the outcome's [`Outcome::calls`] holds every call.
    ToolCall {
        /// The call's id, unique in the session.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments.
        arguments: Value,
        /// The MCP server the tool came from, if any.
        server: Option<String>,
        /// The caller is to run it ([`crate::TurnContext::tool_call_for_caller`]).
        for_caller: bool,
    },
    /// A tool call's result (or its error's description, when `ok` is false).
    ToolResult {
        /// The id of the call it answers.
        call_id: String,
        /// The result.
        result: Value,
        /// Whether the tool returned a result rather than an error.
        ok: bool,
    },
    /// The turn's outcome (durable when `Ok`); always the last item.
    Outcome(Result<Outcome>),
}

impl From<Streamed> for StreamEvent {
    fn from(streamed: Streamed) -> Self {
        match streamed {
            Streamed::Chunk(text) => Self::Chunk(text),
            Streamed::ToolCall(call) => {
                let call = *call;
                Self::ToolCall {
                    call_id: call.call_id,
                    name: call.name,
                    arguments: call.arguments,
                    server: call.server,
                    for_caller: call.for_caller,
                }
            }
            Streamed::ToolResult(result) => {
                let result = *result;
                Self::ToolResult {
                    call_id: result.call_id,
                    result: result.result,
                    ok: result.ok,
                }
            }
        }
    }
}

/// The chunks of one streamed turn followed by its outcome. Returned by
/// [`crate::Runtime::call_streaming`].
pub struct TurnStream {
    key: SessionKey,
    chunks: mpsc::Receiver<Streamed>,
    outcome: Option<oneshot::Receiver<Result<Outcome>>>,
    /// Interrupts the turn if the stream is dropped before its outcome (`cancel_on_drop`).
    abandon: Option<CancellationToken>,
}

impl std::fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnStream")
            .field("key", &self.key)
            .field("finished", &self.outcome.is_none())
            .finish_non_exhaustive()
    }
}

impl TurnStream {
    pub(crate) fn new(
        key: SessionKey,
        chunks: mpsc::Receiver<Streamed>,
        outcome: oneshot::Receiver<Result<Outcome>>,
        abandon: Option<CancellationToken>,
    ) -> Self {
        Self {
            key,
            chunks,
            outcome: Some(outcome),
            abandon,
        }
    }

    /// Waits for the end of the turn, discarding chunks not yet read.
    pub async fn outcome(mut self) -> Result<Outcome> {
        use futures::StreamExt;
        while let Some(event) = self.next().await {
            if let StreamEvent::Outcome(outcome) = event {
                return outcome;
            }
        }
        Err(Error::SessionFailed {
            key: self.key.clone(),
        })
    }
}

impl Stream for TurnStream {
    type Item = StreamEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        let this = self.get_mut();
        let Some(outcome) = this.outcome.as_mut() else {
            return Poll::Ready(None);
        };
        // Chunks end when the turn's task drops its sender, which happens before the outcome is
        // sent; so every chunk is delivered before the outcome.
        if let Some(streamed) = ready!(this.chunks.poll_recv(cx)) {
            return Poll::Ready(Some(streamed.into()));
        }
        let result = ready!(Pin::new(outcome).poll(cx));
        this.outcome = None;
        this.abandon = None;
        let outcome = result.unwrap_or_else(|_| {
            Err(Error::SessionFailed {
                key: this.key.clone(),
            })
        });
        Poll::Ready(Some(StreamEvent::Outcome(outcome)))
    }
}

impl Drop for TurnStream {
    fn drop(&mut self) {
        if let Some(abandon) = self.abandon.take() {
            abandon.cancel();
        }
    }
}
