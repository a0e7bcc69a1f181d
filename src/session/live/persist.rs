//! Persistence of a live session: applying events in memory, writing them to the store, the
//! backlog of events a failing store left unsaved, and reloading after a conflict.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Live;
use crate::error::Error;
use crate::session::{SessionArgs, TurnRequest};
use crate::state::{Event, EventKind};
use crate::store::StoreError;

/// Whether a flush that failed with `error` stored its events all the same: committed on the
/// primary, short of the replicas the store waits for.
pub(crate) fn stored_all_the_same(error: &Error) -> bool {
    match error {
        Error::Store { source, .. } => matches!(**source, StoreError::NotReplicated { .. }),
        _ => false,
    }
}

/// An append whose outcome is unknown: what it was based on and how many events it carried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Uncertain {
    base: u64,
    count: usize,
}

impl Live {
    /// Whether a new turn must first retry saving the backlog (see [`Live::retry_backlog`]).
    pub(crate) fn backlog_due(&self) -> bool {
        self.unsaved.len() >= crate::config::MAX_UNSAVED_EVENTS
            && !self.queue.is_busy()
            && self.stopping.is_none()
    }

    /// Bounds what a failing store leaves in memory. Turns whose save failed stay unsaved (their
    /// callers were told) and are written by the next successful save; past
    /// [`crate::config::MAX_UNSAVED_EVENTS`], a new turn that finds the session idle first retries that
    /// save, and is refused with the store's error, without running its agent, if it fails
    /// again. Returns the request when it may go on.
    pub(crate) async fn retry_backlog(&mut self, request: TurnRequest) -> Option<TurnRequest> {
        match self.flush().await {
            Ok(()) => Some(request),
            // The backlog is stored (short of replicas, which its own callers were told); this
            // request has nothing to do with that and goes on.
            Err(error) if stored_all_the_same(&error) => Some(request),
            Err(error) => {
                self.answer(request, Err(error));
                None
            }
        }
    }

    /// Applies events to the in-memory session and marks them unsaved.
    pub(super) fn apply(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let state = Arc::make_mut(&mut self.state);
        let mut summary_changed = false;
        for event in &events {
            self.record.apply(event);
            if let Some(delta) = &event.state_delta {
                state.apply(delta);
            }
            summary_changed |= matches!(
                event.kind,
                EventKind::Summary { .. } | EventKind::ContextCleared {}
            );
        }
        self.window.extend(&events);
        if summary_changed {
            self.refresh_summary();
        }
        if self.unsaved.is_empty() {
            // The usual case (the last turn was saved): the turn's own buffer becomes the
            // unsaved one, no copy.
            self.unsaved = events;
        } else {
            self.unsaved.extend(events);
        }
        let unsaved = self.unsaved.len();
        self.shared.gauges.unsaved.store(unsaved, Ordering::Relaxed);
        self.shared.dirty.store(true, Ordering::Release);
    }

    /// Writes unsaved events to the store. On a conflict (another writer changed the session)
    /// the session reloads from the store and the unsaved events are dropped: they were never
    /// acknowledged.
    pub(super) async fn flush(&mut self) -> Result<(), Error> {
        if let Some(uncertain) = self.uncertain.take() {
            self.read_back(uncertain).await?;
        }
        if self.unsaved.is_empty() {
            return Ok(());
        }
        let store = self.deps.store.clone();
        let attempted = Uncertain {
            base: self.record.version,
            count: self.unsaved.len(),
        };
        let written = match &self.deps.keeper {
            None => {
                store
                    .append(&self.key, self.record.version, &self.unsaved)
                    .await
            }
            Some(keeper) => match keeper.fence(&self.key) {
                Ok(lease) => {
                    store
                        .append_fenced(&self.key, self.record.version, &self.unsaved, &lease)
                        .await
                }
                Err(lapsed) => Err(lapsed),
            },
        };
        match written {
            Ok(version) => {
                if let Some(last) = self.unsaved.last() {
                    self.acknowledged_through = last.seq;
                }
                self.saved(version);
                Ok(())
            }
            Err(err @ StoreError::NotReplicated { version, .. }) => {
                // Committed on the primary, short of replicas: the session goes on from what the
                // store holds (no spurious conflict next turn), but the callers hear it.
                self.saved(version);
                let error = Error::store(&self.key, err);
                tracing::warn!(key = %self.key, %error, "turn stored, not replicated in time");
                Err(error)
            }
            Err(err) => {
                if err.is_environmental() {
                    // A timeout or a lost connection does not say whether the write committed.
                    self.uncertain = Some(attempted);
                }
                let conflict = matches!(err, StoreError::Conflict { .. });
                if matches!(err, StoreError::NotOwner { .. } | StoreError::Fenced { .. }) {
                    self.lost_lease();
                }
                let error = Error::store(&self.key, err);
                tracing::warn!(key = %self.key, %error, "turn not persisted");
                if conflict {
                    self.reload().await;
                }
                Err(error)
            }
        }
    }

    /// The store holds everything unsaved, as `version`.
    fn saved(&mut self, version: u64) {
        self.record.version = version;
        // Dropped, not cleared: an idle session should not keep the buffer's capacity.
        self.unsaved = Vec::new();
        self.shared.dirty.store(false, Ordering::Release);
    }

    /// Finds out whether an append whose outcome was unknown committed, by reading back the
    /// log where its events would be: events carry random ids, so finding this session's own
    /// there means the write committed (as version `base + 1`), and it is adopted (its events
    /// are no longer unsaved). Otherwise the events are written again; the store's
    /// compare-and-set still refuses that if anyone else wrote meanwhile.
    async fn read_back(&mut self, attempted: Uncertain) -> Result<(), Error> {
        let Some(first) = self.unsaved.first().map(|e| e.seq) else {
            return Ok(());
        };
        let store = self.deps.store.clone();
        let written = match store.read_events(&self.key, first, attempted.count).await {
            Ok(events) => events,
            Err(err) => {
                self.uncertain = Some(attempted);
                return Err(Error::store(&self.key, err));
            }
        };
        let ours = written.len() == attempted.count
            && written
                .iter()
                .zip(&self.unsaved)
                .all(|(stored, mine)| stored.id == mine.id);
        if ours {
            tracing::info!(key = %self.key, "an append with an unknown outcome had committed");
            self.record.version = attempted.base + 1;
            self.unsaved.drain(..attempted.count);
            let unsaved = self.unsaved.len();
            self.shared.gauges.unsaved.store(unsaved, Ordering::Relaxed);
            if self.unsaved.is_empty() {
                self.shared.dirty.store(false, Ordering::Release);
            }
        }
        Ok(())
    }

    async fn reload(&mut self) {
        // Whatever another writer did, what this session saw acknowledged is vouched for no more.
        self.acknowledged_through = 0;
        let args = SessionArgs {
            key: self.key.clone(),
            deps: self.deps.clone(),
            shared: self.shared.clone(),
            loaded: None,
        };
        match Live::load(args).await {
            Ok(fresh) => {
                self.record = fresh.record;
                self.state = fresh.state;
                self.window = fresh.window;
                // The cached summary follows the record it was taken from: the next compaction
                // must build on the stored summary, not on the one held before the conflict.
                self.summary = fresh.summary;
                self.unsaved.clear();
                self.shared.dirty.store(false, Ordering::Release);
            }
            Err(err) => {
                tracing::error!(key = %self.key, error = %err, "reload after a conflict failed");
            }
        }
    }

    /// This process no longer owns the session: what is unsaved can never be written, nothing
    /// more runs, and the registry is asked to stop the session (which holds new messages for
    /// the next activation, wherever it happens).
    fn lost_lease(&mut self) {
        self.lease_lost = true;
        self.drop_unsaved("this process lost its lease");
        if let Some(keeper) = &self.deps.keeper {
            keeper.report_lost(&self.key);
        }
    }

    /// Drops events that can never be written; their callers were already told.
    pub(super) fn drop_unsaved(&mut self, why: &str) {
        if !self.unsaved.is_empty() {
            tracing::warn!(
                key = %self.key,
                unsaved = self.unsaved.len(),
                "dropping events the store never acknowledged: {why}"
            );
        }
        self.unsaved = Vec::new();
        self.shared.dirty.store(false, Ordering::Release);
    }

    /// The error for a call refused because this process no longer owns the session.
    pub(super) fn not_owner(&self) -> Error {
        Error::store(
            &self.key,
            StoreError::NotOwner {
                key: self.key.clone(),
                owner: None,
            },
        )
    }

    /// `post_stop`: gives the session's lease back, if it holds one.
    pub(crate) async fn release_lease(&mut self) {
        if let Some(keeper) = &self.deps.keeper {
            keeper.release(&self.key).await;
        }
    }

    /// `post_stop`: one more attempt for anything still unsaved.
    pub(crate) async fn final_flush(&mut self) {
        if self.unsaved.is_empty() {
            return;
        }
        if let Err(error) = self.flush().await {
            tracing::error!(
                key = %self.key,
                unsaved = self.unsaved.len(),
                %error,
                "session stopped with events the store never acknowledged"
            );
        }
    }
}
