//! Writes that are not turns: a context-cleared marker, and entries appended with a change of
//! state — at once, or (`Append::between_turns`) once the running turn is written.

use super::Live;
use crate::call::Entry;
use crate::error::Error;
use crate::session::{now_ms, Append, StopKind};
use crate::state::{Author, Event, EventKind};
use crate::stats::{Rejection, RuntimeEvent};

/// Most appends one session holds while they wait for its running turn: past it, another is
/// refused as busy rather than held without bound.
pub(crate) const MAX_DEFERRED_APPENDS: usize = 64;

impl Live {
    /// Appends a `ContextCleared` event: the agent's window starts after it; state is kept.
    pub(crate) async fn clear_context(&mut self) -> Result<(), Error> {
        self.journal.settle().await?;
        let event = Event::new(
            self.journal.next_seq(),
            Author::System,
            now_ms(),
            EventKind::ContextCleared {},
        );
        self.journal.commit(vec![event]).await
    }

    /// Appends `entries` (the last one carrying `state`, or a note when there are none) without
    /// running a turn; answers the first new event's seq once the store acknowledged them.
    pub(crate) async fn append(
        &mut self,
        entries: Vec<Entry>,
        state: crate::state::StateDelta,
    ) -> Result<crate::state::Seq, Error> {
        self.journal.settle().await?;
        let first = self.journal.next_seq();
        let at = now_ms();
        let mut entries = entries;
        if entries.is_empty() {
            entries.push(Entry::Note("session state changed".into()));
        }
        let mut events: Vec<Event> = entries
            .into_iter()
            .zip(first..)
            .map(|(entry, seq)| {
                let (author, kind) = entry.into_event();
                Event::new(seq, author, at, kind)
            })
            .collect();
        if !state.is_empty() {
            if let Some(last) = events.last_mut() {
                last.state_delta = Some(state);
            }
        }
        self.journal.commit(events).await?;
        Ok(first)
    }

    /// Whether a turn is running (an append between turns waits for it).
    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Holds `append` until the running turn is written; refuses it as busy when
    /// [`MAX_DEFERRED_APPENDS`] already wait.
    pub(crate) fn defer(&mut self, append: Append) {
        if self.deferred.len() >= MAX_DEFERRED_APPENDS {
            tracing::warn!(
                key = %self.key,
                waiting = MAX_DEFERRED_APPENDS,
                "an append between turns was refused: as many already wait for the running turn"
            );
            self.deps
                .counters
                .record(RuntimeEvent::Rejected(Rejection::Busy));
            let key = self.key.clone();
            let _ = append.reply.send(Err(Error::Busy { key }));
            return;
        }
        self.deferred.push(append);
    }

    /// Whether appends wait and no turn runs any more: [`Live::apply_deferred`] has work.
    pub(crate) fn has_deferred(&self) -> bool {
        !self.deferred.is_empty() && self.running.is_none()
    }

    /// Once no turn runs: writes the appends that waited for it, in the order they came, before
    /// any waiting message starts its turn. A session being deleted answers them `Deleted`.
    pub(crate) async fn apply_deferred(&mut self) {
        if self.running.is_some() {
            return;
        }
        for append in std::mem::take(&mut self.deferred) {
            let result = match &self.stopping {
                Some(StopKind::Delete(_)) => Err(Error::Deleted {
                    key: self.key.clone(),
                }),
                _ => self.append(append.entries, append.state).await,
            };
            let _ = append.reply.send(result);
        }
    }
}
