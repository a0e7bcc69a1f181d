//! How a live session stops: taking the registry's stop request (interrupting the running
//! turn where the kind of stop asks for it), then deleting it or handing it to memory as its last
//! step.

use super::Live;
use crate::error::Error;
use crate::session::StopKind;
use crate::state::InterruptReason;

impl Live {
    /// Takes a stop request from the registry.
    pub(crate) fn begin_stop(&mut self, kind: StopKind) {
        let reason = match &kind {
            StopKind::Passivate => None,
            StopKind::Shutdown | StopKind::LeaseLost => Some(InterruptReason::Shutdown),
            StopKind::Delete(_) => Some(InterruptReason::Requested),
        };
        if let (Some(reason), Some(running)) = (reason, &self.running) {
            running.control.interrupt(reason);
        }
        match (&self.stopping, kind) {
            // A delete already under way is not downgraded; a passivation becomes a shutdown.
            (Some(StopKind::Delete(_)), StopKind::Delete(reply)) => {
                let _ = reply.send(Ok(false));
            }
            (Some(StopKind::Delete(_) | StopKind::LeaseLost), _) => {}
            (_, kind) => {
                if matches!(kind, StopKind::Delete(_)) {
                    self.deleted_live = self.running.is_some()
                        || self.queue.is_busy()
                        || self.journal.held_apart() > 0;
                }
                self.stopping = Some(kind);
            }
        }
    }

    /// The last step before the actor stops: delete, or hand what the store holds to memory.
    /// Nothing is left to write: every event the session shows was acknowledged when it was
    /// made, and a write whose outcome is unknown is settled by the next activation's load.
    pub(crate) async fn finish_stop(&mut self) {
        match self.stopping.take() {
            Some(StopKind::Delete(reply)) => {
                let result = self
                    .deps
                    .store
                    .delete(&self.key)
                    .await
                    .map(|stored| stored || self.deleted_live)
                    .map_err(|err| Error::store(&self.key, err));
                let _ = reply.send(result);
            }
            Some(StopKind::LeaseLost) => {}
            _ => self.ingest_on_stop().await,
        }
    }

    /// `post_stop`: gives the session's lease back, if it holds one.
    pub(crate) async fn release_lease(&mut self) {
        if let Some(keeper) = &self.deps.keeper {
            keeper.release(&self.key).await;
        }
    }
}
