//! A live session's durable view, and the writes that extend it.
//!
//! The rule it keeps (contract 13, "only acknowledged events are real"): the head, state and
//! window a session shows, builds its turns' context on and answers retries from hold only events
//! the store acknowledged. A turn's events are written first and folded in only once the store
//! said yes; a write the store refused leaves nothing behind, and one whose outcome is unknown (a
//! timeout, a lost connection) is held apart, never shown, until the store is read back
//! ([`Journal::settle`]).
//!
//! What a failed write leaves:
//!
//! | the store says | the events | the journal |
//! |---|---|---|
//! | acknowledged | folded in | goes on |
//! | stored, short of replicas (`NotReplicated`) | folded in (they are stored) | goes on |
//! | another writer changed the session (`Conflict`) | dropped | reloads (stale until it can) |
//! | not the owner (`NotOwner`, `Fenced`) | dropped | lease lost: the session must stop |
//! | no answer (timeout, connection lost) | held apart | uncertain until read back |
//! | any other refusal | dropped | goes on |

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{LeaseKeeper, SessionShared};
use crate::context::Window;
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{Event, EventKind, ScopedState, Seq, SessionRecord};
use crate::store::{Lease, LoadedSession, Store, StoreError};

/// The session's acknowledged view and its writer.
pub(crate) struct Journal {
    key: SessionKey,
    store: Arc<dyn Store>,
    /// The leases of this runtime, when it shares its store: every write is fenced by one.
    keeper: Option<Arc<LeaseKeeper>>,
    /// Where the session's gauges are published for the registry and the live page.
    shared: Arc<SessionShared>,
    /// The head folded over acknowledged events; `record.version` is the store's version.
    record: SessionRecord,
    /// Session, user and app state as the agent sees it. Behind an `Arc` so that a turn gets a
    /// snapshot without copying; `Arc::make_mut` copies only if a turn still holds it.
    state: Arc<ScopedState>,
    /// The newest acknowledged events, from which the agent's context window is drawn and
    /// retries are answered.
    window: Window,
    /// The summary's text, shared with turns without copying.
    summary: Option<Arc<str>>,
    /// What must be found out before the next write or turn, if anything.
    unsettled: Option<Unsettled>,
    /// The newest event of a write the store acknowledged in full (replicas included, where it
    /// waits for them) while this journal was open: a retry answered from events up to it needs
    /// no replica check.
    acknowledged_through: Seq,
    /// A write found this process no longer the session's owner: nothing more is written.
    lease_lost: bool,
}

/// Why the journal cannot write or start a turn before it looks at the store again.
enum Unsettled {
    /// A write whose outcome is unknown: its events, and the version it was based on.
    Uncertain { base: u64, events: Vec<Event> },
    /// Another writer changed the session, and reading it again failed.
    Stale,
}

impl Journal {
    /// A journal over what the store loaded for `key` (a session never stored starts empty).
    pub(crate) fn open(
        key: SessionKey,
        loaded: LoadedSession,
        store: Arc<dyn Store>,
        keeper: Option<Arc<LeaseKeeper>>,
        shared: Arc<SessionShared>,
        window: usize,
    ) -> Self {
        let mut journal = Self {
            record: SessionRecord::new(key.clone(), super::now_ms()),
            key,
            store,
            keeper,
            shared,
            state: Arc::default(),
            window: Window::new(Vec::new(), window),
            summary: None,
            unsettled: None,
            acknowledged_through: 0,
            lease_lost: false,
        };
        journal.replace(loaded);
        journal
    }

    /// The head as acknowledged.
    pub(crate) fn record(&self) -> &SessionRecord {
        &self.record
    }

    /// Scoped state as acknowledged.
    pub(crate) fn state(&self) -> &Arc<ScopedState> {
        &self.state
    }

    /// The newest acknowledged events.
    pub(crate) fn window(&self) -> &Window {
        &self.window
    }

    /// The summary's text, if there is one.
    pub(crate) fn summary(&self) -> Option<&Arc<str>> {
        self.summary.as_ref()
    }

    /// The sequence number the next event gets.
    pub(crate) fn next_seq(&self) -> Seq {
        self.record.next_seq
    }

    /// The last event folded into the summary or removed by `clear_context`: the agent sees
    /// only later events.
    pub(crate) fn covered_through(&self) -> Seq {
        let summarised = self.record.summary.as_ref().map_or(0, |s| s.through_seq);
        summarised.max(self.record.cleared_through)
    }

    /// Whether the store must be looked at before the next write or turn
    /// ([`Journal::settle`]).
    pub(crate) fn is_settled(&self) -> bool {
        self.unsettled.is_none()
    }

    /// Events of a write whose outcome is unknown, held apart (never shown) until read back.
    pub(crate) fn held_apart(&self) -> usize {
        match &self.unsettled {
            Some(Unsettled::Uncertain { events, .. }) => events.len(),
            _ => 0,
        }
    }

    /// Whether a write found this process no longer the session's owner.
    #[cfg(test)]
    pub(crate) fn lease_lost(&self) -> bool {
        self.lease_lost
    }

    /// Whether an answer built from events up to `seq` needs no replica check: the store
    /// acknowledged them in full while this journal was open.
    pub(crate) fn acknowledged_in_full(&self, seq: Seq) -> bool {
        seq <= self.acknowledged_through
    }

    /// Finds out what an unsettled journal must know before it writes again: whether an
    /// uncertain write committed (read back: found, its events are folded in; not found, they
    /// are dropped), or what another writer left (reloaded). A journal that is settled already
    /// does nothing. On failure it stays unsettled and nothing may build on it.
    pub(crate) async fn settle(&mut self) -> Result<(), Error> {
        match self.unsettled.take() {
            None => Ok(()),
            Some(Unsettled::Uncertain { base, events }) => self.read_back(base, events).await,
            Some(Unsettled::Stale) => self.reload().await,
        }
    }

    /// Writes `events` and, once the store acknowledged them, folds them in. An error means the
    /// events are not acknowledged; what became of them is in the module's table.
    ///
    /// The events continue the log from [`Journal::next_seq`] as it is once settled: a caller
    /// settles before it numbers them. Should the journal not be settled, it settles here, and
    /// events numbered before that are refused by the store if the read-back moved the log on.
    pub(crate) async fn commit(&mut self, events: Vec<Event>) -> Result<(), Error> {
        if events.is_empty() {
            return Ok(());
        }
        if self.lease_lost {
            return Err(self.not_owner());
        }
        self.settle().await?;
        let base = self.record.version;
        self.shared
            .gauges
            .unsaved
            .store(events.len(), Ordering::Relaxed);
        self.shared.dirty.store(true, Ordering::Release);
        let (fence, written) = self.write(base, &events).await;
        self.shared.dirty.store(false, Ordering::Release);
        let last = events.last().map_or(0, |e| e.seq);
        match written {
            Ok(version) => {
                self.acknowledged_through = last;
                self.fold(events, version);
                Ok(())
            }
            Err(err @ StoreError::NotReplicated { version, .. }) => {
                // Committed on the primary, short of replicas: the session goes on from what the
                // store holds (no spurious conflict next turn), but the callers hear it.
                self.fold(events, version);
                Err(self.failed(err, "stored, not replicated in time"))
            }
            Err(err @ (StoreError::NotOwner { .. } | StoreError::Fenced { .. })) => {
                self.lose_lease(fence.as_ref());
                Err(self.failed(err, "not stored: this process lost the session's lease"))
            }
            Err(err @ StoreError::Conflict { .. }) => {
                let error = self.failed(err, "not stored: another writer changed the session");
                // Whatever another writer did, what was acknowledged here is vouched for no more.
                self.acknowledged_through = 0;
                if let Err(reload) = self.reload().await {
                    tracing::warn!(key = %self.key, error = %reload, "reload after a conflict failed");
                }
                Err(error)
            }
            Err(err) if err.is_environmental() => {
                // A timeout or a lost connection does not say whether the write committed.
                self.unsettled = Some(Unsettled::Uncertain { base, events });
                self.shared
                    .gauges
                    .unsaved
                    .store(self.held_apart(), Ordering::Relaxed);
                Err(self.failed(err, "outcome unknown: read back before the next write"))
            }
            Err(err) => Err(self.failed(err, "not stored")),
        }
    }

    /// Logs a write the store did not acknowledge, and gives the caller's error.
    fn failed(&self, err: StoreError, what: &str) -> Error {
        if err.is_environmental() {
            crate::stats::store_error(self.store.name(), "append");
        }
        let error = Error::store(&self.key, err);
        tracing::warn!(key = %self.key, %error, "turn not acknowledged: {what}");
        error
    }

    /// One append, fenced by the session's lease when the runtime keeps leases; with the
    /// lease it carried (none when the lease had already lapsed here).
    async fn write(&self, base: u64, events: &[Event]) -> (Option<Lease>, Result<u64, StoreError>) {
        let Some(keeper) = &self.keeper else {
            return (None, self.store.append(&self.key, base, events).await);
        };
        match keeper.fence(&self.key) {
            Ok(lease) => {
                let written = self
                    .store
                    .append_fenced(&self.key, base, events, &lease)
                    .await;
                (Some(lease), written)
            }
            Err(lapsed) => (None, Err(lapsed)),
        }
    }

    /// Whether this process may still write the session: with leases, whether the lease is
    /// held and inside its local deadline. A lease found lapsed is lost as a refused write
    /// would lose it, so that no turn runs its agent only to be refused.
    pub(crate) fn may_write(&mut self) -> bool {
        if self.lease_lost {
            return false;
        }
        let Some(keeper) = &self.keeper else {
            return true;
        };
        if keeper.fence(&self.key).is_ok() {
            return true;
        }
        self.lose_lease(None);
        false
    }

    /// Folds acknowledged events into the head, the state and the window, as `version`.
    fn fold(&mut self, events: Vec<Event>, version: u64) {
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
        self.record.version = version;
        self.window.extend(events);
        if summary_changed {
            self.refresh_summary();
        }
        self.shared.gauges.unsaved.store(0, Ordering::Relaxed);
        self.shared.gauges.publish(&self.record);
    }

    /// Reads back where an uncertain write's events would be: events carry random ids, so
    /// finding this session's own there means the write committed (as version `base + 1`).
    /// Otherwise it did not commit; should it still land later, the next write's
    /// compare-and-set refuses, and the session reloads.
    async fn read_back(&mut self, base: u64, events: Vec<Event>) -> Result<(), Error> {
        let first = events.first().map_or(self.record.next_seq, |e| e.seq);
        let stored = match self.store.read_events(&self.key, first, events.len()).await {
            Ok(stored) => stored,
            Err(err) => {
                self.unsettled = Some(Unsettled::Uncertain { base, events });
                return Err(self.unreadable(err));
            }
        };
        let ours = stored.len() == events.len()
            && stored.iter().zip(&events).all(|(s, mine)| s.id == mine.id);
        if ours {
            tracing::info!(key = %self.key, "a write with an unknown outcome had committed");
            self.fold(events, base + 1);
        } else {
            tracing::info!(key = %self.key, "a write with an unknown outcome had not committed");
            self.shared.gauges.unsaved.store(0, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads the session again; on failure the journal is stale until it can.
    async fn reload(&mut self) -> Result<(), Error> {
        let window = self.window.size();
        match self.store.load(&self.key, window).await {
            Ok(loaded) => {
                self.replace(loaded);
                Ok(())
            }
            Err(err) => {
                self.unsettled = Some(Unsettled::Stale);
                Err(self.unreadable(err))
            }
        }
    }

    /// Takes `loaded` as the whole view.
    fn replace(&mut self, loaded: LoadedSession) {
        let record = loaded
            .record
            .unwrap_or_else(|| SessionRecord::new(self.key.clone(), super::now_ms()));
        self.state = Arc::new(ScopedState {
            session: record.state.clone(),
            user: loaded.user_state,
            app: loaded.app_state,
        });
        self.window = Window::new(loaded.events, self.window.size());
        self.record = record;
        // The cached summary follows the record it was taken from: the next compaction must
        // build on the stored summary.
        self.refresh_summary();
        self.shared.gauges.unsaved.store(0, Ordering::Relaxed);
        self.shared.gauges.publish(&self.record);
    }

    fn refresh_summary(&mut self) {
        self.summary = self
            .record
            .summary
            .as_ref()
            .map(|s| Arc::from(s.text.as_str()));
    }

    /// The error for a turn refused because the session could not be read: nothing of it ran.
    fn unreadable(&self, err: StoreError) -> Error {
        if err.is_environmental() {
            crate::stats::store_error(self.store.name(), "read");
        }
        Error::Activation {
            key: self.key.clone(),
            source: Arc::new(err),
        }
    }

    /// This process no longer owns the session: nothing more is written, and the keeper is told
    /// (it has the registry stop the session).
    fn lose_lease(&mut self, fence: Option<&Lease>) {
        self.lease_lost = true;
        if let Some(keeper) = &self.keeper {
            keeper.report_lost(&self.key, fence);
        }
    }

    /// The error for a write refused because this process no longer owns the session.
    pub(crate) fn not_owner(&self) -> Error {
        Error::store(
            &self.key,
            StoreError::NotOwner {
                key: self.key.clone(),
                owner: None,
            },
        )
    }
}

#[cfg(test)]
mod tests;
