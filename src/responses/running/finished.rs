//! The wait for a plain response's outcome, which its request holds, and the guard that takes
//! a response out of the map should its request go away before its turn is admitted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::Running;
use crate::error::Error;
use crate::responses::object::ResponseObject;
use crate::responses::{Responses, ResponsesError};

/// The finished response object of a response that is neither streamed nor in the
/// background: a future that ends with the object once the turn is stored, or with the
/// turn's error. Dropping it leaves the response running.
///
/// The request that made the response waits on the turn itself (no task of its own, and no
/// hand-over between tasks, for the common case of a caller that stays); should it go away
/// first, the rest of the wait moves to a task of its own on the runtime that created the
/// response, which still records how the response ended.
pub struct Finished {
    work: Option<Waiting>,
    /// Where the rest of the wait goes when this is dropped first.
    runtime: tokio::runtime::Handle,
}

/// The wait for a plain response's outcome (its admission too, while the session waits for a
/// free slot), and its recording.
pub(super) type Waiting =
    Pin<Box<dyn Future<Output = Result<ResponseObject, Error>> + Send + Sync>>;

impl Finished {
    /// Takes the first step of `work` at once: a turn for which a slot is free is admitted by
    /// it, so it is in its session's queue before `create` returns, as the other kinds are.
    pub(super) async fn start(mut work: Waiting) -> Self {
        if let Poll::Ready(answer) = futures::poll!(work.as_mut()) {
            work = Box::pin(std::future::ready(answer));
        }
        Self {
            work: Some(work),
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finished")
            .field("pending", &self.work.is_some())
            .finish()
    }
}

impl Future for Finished {
    type Output = Result<ResponseObject, ResponsesError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Taken out while polled: a wait that panics is not handed on to be polled again.
        let Some(mut work) = self.work.take() else {
            return Poll::Ready(Err(ResponsesError::Internal(
                "the response was already answered".into(),
            )));
        };
        let Poll::Ready(answer) = work.as_mut().poll(cx) else {
            self.work = Some(work);
            return Poll::Pending;
        };
        Poll::Ready(match answer {
            Ok(object) => Ok(object),
            // The conversation named does not exist (the session refused the turn).
            Err(Error::NotFound { key }) => Err(ResponsesError::not_found_in(
                "conversation",
                format!("no conversation {}", key.session_id()),
            )),
            Err(error) => Err(ResponsesError::Runtime(error)),
        })
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            // A runtime that has shut down drops it unrun: nothing is left to record it for.
            drop(self.runtime.spawn(work));
        }
    }
}

/// Takes a response out of the map of running ones if the request that made it goes away
/// while its turn waits to be admitted (for a free slot): nothing of it runs then, and
/// nothing would ever end it.
pub(super) struct Unadmitted<'a> {
    pub(super) service: &'a Responses,
    pub(super) running: &'a Arc<Running>,
    pub(super) owner: bool,
}

impl Drop for Unadmitted<'_> {
    fn drop(&mut self) {
        if self.owner {
            self.running.done.cancel();
            self.service.leave(&self.running.shape.id, self.running);
        }
    }
}
