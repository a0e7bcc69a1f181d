//! The request body's deadline: a body must arrive whole within the request timeout, counted
//! from when its head arrived.
//!
//! One deadline for the whole body rather than tower-http's `RequestBodyTimeoutLayer`, whose
//! timer restarts with every frame: a client that drips a byte just inside that timeout would
//! hold its connection for as long as it likes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::gateway::Gateway;

/// The error a body yields when its deadline passes; the extractors answer it as 408
/// `body_timeout`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {after:?}")]
pub(crate) struct BodyTimedOut {
    pub after: Duration,
}

/// Puts every request's body under the gateway's request timeout.
pub(crate) async fn body_deadline(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    let after = gateway.config().request_timeout;
    next.run(request.map(|body| Body::new(DeadlineBody::new(body, after))))
        .await
}

/// A body that fails with [`BodyTimedOut`] if it has not ended by its deadline.
struct DeadlineBody {
    body: Body,
    after: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl DeadlineBody {
    fn new(body: Body, after: Duration) -> Self {
        Self {
            body,
            after,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now() + after)),
        }
    }
}

impl hyper::body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut {
                after: this.after,
            })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Whether `error` (or one of its causes) is a body that missed its deadline.
pub(crate) fn timed_out(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(timed_out) = e.downcast_ref::<BodyTimedOut>() {
            return Some(timed_out.after);
        }
        cause = e.source();
    }
    None
}
