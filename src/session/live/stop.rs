//! How a live session stops: taking the registry's stop request (interrupting the running
//! turn where the kind of stop asks for it), then deleting or flushing as its last step.

use std::sync::atomic::Ordering;

use super::{persist, Live};
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
                    self.deleted_live =
                        self.running.is_some() || self.queue.is_busy() || !self.unsaved.is_empty();
                }
                self.stopping = Some(kind);
            }
        }
    }

    /// The last step before the actor stops: delete, or flush what is unsaved.
    pub(crate) async fn finish_stop(&mut self) {
        match self.stopping.take() {
            Some(StopKind::Delete(reply)) => {
                self.unsaved.clear();
                self.shared.dirty.store(false, Ordering::Release);
                let result = self
                    .deps
                    .store
                    .delete(&self.key)
                    .await
                    .map(|stored| stored || self.deleted_live)
                    .map_err(|err| Error::store(&self.key, err));
                let _ = reply.send(result);
            }
            Some(StopKind::LeaseLost) => self.drop_unsaved("its lease was lost"),
            _ => {
                let flushed = self.flush().await;
                if flushed
                    .as_ref()
                    .err()
                    .is_none_or(persist::stored_all_the_same)
                {
                    self.ingest_on_stop().await;
                }
            }
        }
    }
}
