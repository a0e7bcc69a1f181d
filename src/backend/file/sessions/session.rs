//! One session's append, in its steps: prepare (pure), the journal entries for its log lines
//! and now and then its head (written behind the journal, see `journal/behind.rs`), and the
//! clean-up of an unfinished append a crash left; and the store's side of it: the whole append,
//! reading the state it builds on and journaling what it makes. The caller holds the session's
//! lock, so nothing else writes these files meanwhile.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Arc;

use super::fsio::{io_error, keep_cut};
use super::journal::{self, Entry};
use super::layout::{self, SessionPaths};
use super::line;
use super::log::{corrupt, encode_head, Current};
use super::{blocking, Inner};
use crate::key::SessionKey;
use crate::state::{Event, EventKind, SessionRecord, SplitDelta};
use crate::store::{check_continues, StoreError};

/// `head.json` is rewritten once this many appends lie past it in the log.
///
/// Rewriting it costs a journal entry the size of the head (covered by the journal's next shared
/// flush), then a temporary file renamed over it, with no flush of its own; once every 32 appends
/// that adds little to an append on average. In exchange, a read that finds no remembered state (the first load after a restart, a listing,
/// `gc`) parses at most 31 appends' events past the head — tens of microseconds for chat-sized
/// turns, independent of the history's length.
pub(super) const HEAD_EVERY: u32 = 32;

/// `head.json` is also rewritten once the log past it reaches this many bytes, so that sessions
/// with large appends (imports, long tool output) keep the same bound on what a cold read parses.
pub(super) const HEAD_EVERY_BYTES: u64 = 256 * 1024;

/// An append checked and encoded, not yet written.
pub(super) struct Prepared {
    /// The session's version after the append.
    pub version: u64,
    /// The session's state once the append is in the log.
    pub after: Current,
    /// The log lines to write, the last one marked with the new version.
    pub lines: Vec<u8>,
    /// The `user:` and `app:` changes the events made, for the shared-state files.
    pub shared: SplitDelta,
    /// What the events could add to the record's size (see [`record_growth`]).
    pub grew: Option<usize>,
}

/// Bytes an append may add to a record besides state and summaries: its counters and
/// timestamps gaining digits, a counter appearing for the first time.
const COUNTER_GROWTH: usize = 64;

/// What `events` could add to a session record's size as JSON, for the head cache's weight:
/// a small allowance when they only move its counters, or `None` when one of them changes its
/// state, its summary or its context (which can add any amount), so that it is weighed again.
pub(super) fn record_growth(events: &[Event]) -> Option<usize> {
    let small = events.iter().all(|event| {
        event.state_delta.is_none()
            && !matches!(
                event.kind,
                EventKind::Summary { .. } | EventKind::ContextCleared {}
            )
    });
    small.then_some(COUNTER_GROWTH)
}

/// Checks the version and the sequence, folds `events` onto the head and encodes their lines.
/// Pure: nothing is written.
pub(super) fn prepare(
    key: &SessionKey,
    current: &Current,
    base_version: u64,
    events: &[Event],
) -> Result<Prepared, StoreError> {
    let found = current.record.as_ref().map_or(0, |r| r.version);
    if found != base_version {
        return Err(StoreError::Conflict {
            key: key.clone(),
            expected: base_version,
            found,
        });
    }
    let mut record = match &current.record {
        Some(record) => record.clone(),
        None => SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
    };
    check_continues(key, record.next_seq, events)?;
    let mut shared = SplitDelta::default();
    for event in events {
        record.apply(event);
        if let Some(delta) = &event.state_delta {
            shared.merge(SplitDelta::from_delta(delta));
        }
    }
    record.version += 1;
    let mut lines = line::encode_append(events, record.version).map_err(|e| {
        StoreError::InvalidRequest(format!("session {key}: events cannot be serialised: {e}"))
    })?;
    // The lines are owed to the log until written behind, and what is owed is bounded by its
    // length: their buffer gives back the room its estimate reserved.
    if lines.capacity() > lines.len() + lines.len() / 4 {
        lines.shrink_to_fit();
    }
    let log_end = current.log_end + lines.len() as u64;
    // An append with no events writes no line: the log, unfinished tail included, stays as is.
    let log_len = if lines.is_empty() {
        current.log_len
    } else {
        log_end
    };
    Ok(Prepared {
        version: record.version,
        after: Current {
            record: Some(record),
            log_end,
            log_len,
            head_end: current.head_end,
            unheaded: current.unheaded.saturating_add(1),
            has_head: current.has_head,
            damage: None,
        },
        lines,
        shared,
        grew: record_growth(events),
    })
}

/// Cuts off the unfinished append a crash left past the log's valid end, keeping a copy of
/// its bytes beside the log (see [`keep_cut`]), so that the next append continues right after
/// the last complete one. Returns the state with the log ending there. Reads nothing else.
pub(super) fn cut_unfinished(
    paths: &SessionPaths,
    key: &SessionKey,
    mut current: Current,
) -> Result<Current, StoreError> {
    if current.log_len <= current.log_end {
        return Ok(current);
    }
    keep_cut(&paths.log, current.log_end, key)?;
    let log = OpenOptions::new()
        .write(true)
        .open(&paths.log)
        .map_err(io_error("open", &paths.log))?;
    log.set_len(current.log_end)
        .map_err(io_error("truncate the unfinished append in", &paths.log))?;
    current.log_len = current.log_end;
    Ok(current)
}

/// The journal entry that appends `lines` to the session's log at `at`, its end; `dir` is the
/// session's folder relative to the root ([`layout::session_dir_relative`]).
pub(super) fn log_entry(dir: &Path, at: u64, lines: Vec<u8>) -> Entry {
    Entry::Append {
        path: dir.join(layout::LOG_FILE),
        at,
        bytes: lines,
    }
}

/// Whether an append leaving the session at `after` rewrites `head.json`: the session has none
/// yet (so that its key is on disk for listings and `gc`), or [`HEAD_EVERY`] appends or
/// [`HEAD_EVERY_BYTES`] lie past it.
pub(super) fn head_due(after: &Current) -> bool {
    !after.has_head
        || after.unheaded >= HEAD_EVERY
        || after.log_end - after.head_end >= HEAD_EVERY_BYTES
}

/// The new `head.json` for `after` — its record, covering its log up to `after.log_end` — as a
/// journal entry. The journal writes it to the file once the entry is durable, so that a crash
/// leaves the old head, or a new one the journal's replay writes again. The head is written
/// behind the journal, after the log bytes it covers. `dir` is as for [`log_entry`].
pub(super) fn head_entry(dir: &Path, after: &Current) -> Result<Option<Entry>, StoreError> {
    let Some(record) = after.record.as_ref() else {
        return Ok(None);
    };
    Ok(Some(Entry::Replace {
        path: dir.join(layout::HEAD_FILE),
        bytes: encode_head(record, after.log_end)?,
    }))
}

/// The session's state once the journal holds the head [`head_entry`] made.
pub(super) fn headed(mut after: Current) -> Current {
    after.has_head = true;
    after.head_end = after.log_end;
    after.unheaded = 0;
    after
}

/// The store's side of an append: the whole of it, reading what it builds on and journaling
/// what it makes.
impl Inner {
    /// A session's state for an append that finds nothing remembered: its files, brought up to
    /// date with the journal, with an unfinished append a crash left cut off (and kept aside).
    /// `acknowledged` is where the log ended as this process last knew it: a log found shorter
    /// is `Corrupt`, and remembered so.
    pub(super) fn read_for_append(
        &self,
        key: &SessionKey,
        acknowledged: Option<u64>,
    ) -> Result<Current, StoreError> {
        let paths = SessionPaths::of(&self.root, key);
        self.journal.settle(&paths.dir)?;
        layout::refuse_links(&self.root, &[&paths.log, &paths.head])?;
        let mut current = super::log::read_current(&paths, key)?;
        if let Some(end) = acknowledged.filter(|end| current.log_len < *end) {
            let damage = format!(
                "the log is {} bytes but {end} were acknowledged; acknowledged events are missing",
                current.log_len
            );
            current.damage = Some(damage.clone());
            self.cache.keep(key, current);
            return Err(super::log::corrupt(key, &paths.log, damage));
        }
        cut_unfinished(&paths, key, current)
    }

    /// One append, under the session's lock (which the caller holds until this returns): what
    /// it builds on (remembered, or read from the files), checked and encoded, the shared state
    /// written, then journaled; the state it leaves is remembered.
    pub(super) async fn append(
        self: Arc<Self>,
        key: SessionKey,
        base_version: u64,
        events: Vec<Event>,
    ) -> Result<u64, StoreError> {
        // Remembered, the common case: no file is read or written before the journal.
        let (current, weighed) = match self.cache.take_weighed(&key) {
            // Remembered damage is refused below, and stays remembered.
            Some((current, weight))
                if current.damage.is_some() || current.log_len <= current.log_end =>
            {
                (current, Some(weight))
            }
            // Not remembered, or its log ends in an unfinished append a crash left, which
            // is cut off first (reading the files again, which hold all of it).
            known => {
                let (inner, key) = (self.clone(), key.clone());
                let acknowledged = known.map(|(known, _)| known.log_end);
                let current = blocking(move || inner.read_for_append(&key, acknowledged)).await?;
                (current, None)
            }
        };
        // Nothing is written (the shared state included) while the journal refuses writes.
        let prepared = match (self.journal.refusal(), &current.damage) {
            (Some(refusal), _) => Err(refusal),
            (None, Some(damage)) => Err(corrupt(
                &key,
                &SessionPaths::of(&self.root, &key).log,
                damage,
            )),
            (None, None) => prepare(&key, &current, base_version, &events),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                // Nothing was written: what is known still holds.
                self.cache.keep(&key, current);
                return Err(e);
            }
        };
        if !prepared.shared.is_empty() {
            // Shared state is written (and flushed) before the append is acknowledged, so
            // that an acknowledged turn's shared changes are always on disk (see
            // docs/stores.md for the crash window this leaves).
            let (inner2, key2, shared) = (self.clone(), key.clone(), prepared.shared.clone());
            if let Err(e) = blocking(move || inner2.write_shared(&key2, &shared)).await {
                self.cache.keep(&key, current);
                return Err(e);
            }
        }
        let version = prepared.version;
        let grew = prepared.grew;
        match self
            .commit_append(&key, current.log_end, prepared.lines, prepared.after)
            .await
        {
            Ok(after) => {
                self.cache.keep_appended(&key, after, weighed, grew);
                Ok(version)
            }
            Err(e) => {
                // Not acknowledged; the files, brought up to date, say what is known.
                self.cache.forget(&key);
                Err(e)
            }
        }
    }

    /// Makes the append durable: its log lines, then — when one is due, or the append has no
    /// lines — the session's new head, queued together in the journal, which writes them to the
    /// files behind. Returns the state to remember. The head's error fails the call only for
    /// an append without lines, whose head is the append; otherwise the append is durable by
    /// then, and either head is consistent with the log.
    pub(super) async fn commit_append(
        &self,
        key: &SessionKey,
        at: u64,
        lines: Vec<u8>,
        after: Current,
    ) -> Result<Current, StoreError> {
        let dir = layout::session_dir_relative(key);
        let empty = lines.is_empty();
        let mut entries = Vec::with_capacity(2);
        if !empty {
            entries.push(log_entry(&dir, at, lines));
        }
        let head = if empty || head_due(&after) {
            match head_entry(&dir, &after) {
                Ok(head) => head,
                Err(e) if empty => return Err(e),
                Err(e) => {
                    tracing::warn!(session = %key, error = %e, "could not encode the head; the log still holds every append");
                    None
                }
            }
        } else {
            None
        };
        let with_head = head.is_some();
        entries.extend(head);
        if entries.is_empty() {
            return Ok(after);
        }
        let mut answers = self.journal.commit_behind(entries).await.into_iter();
        let mut next_answer = || answers.next().unwrap_or_else(|| Err(journal::unanswered()));
        if !empty {
            next_answer()?;
        }
        if !with_head {
            return Ok(after);
        }
        match next_answer() {
            Ok(()) => Ok(headed(after)),
            Err(e) if empty => Err(e),
            Err(e) => {
                tracing::warn!(session = %key, error = %e, "could not rewrite the head; the log still holds every append");
                Ok(after)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::file::FileStore;
    use crate::key::SessionKey;
    use crate::store::conformance::turn_events;
    use crate::store::Store;

    #[tokio::test]
    async fn a_new_sessions_first_append_reads_no_file_and_waits_for_one_flush() {
        let root = tempfile::tempdir().unwrap();
        let store = FileStore::open(root.path()).unwrap();
        let key = SessionKey::new("u", "s").unwrap();
        let loaded = store.load(&key, 20).await.unwrap();
        assert!(loaded.record.is_none());
        // The load remembered that the session has no files, so the append needs no read.
        let (absent, _) = store.inner.cache.take_weighed(&key).unwrap();
        assert!(absent.record.is_none() && absent.log_len == 0 && !absent.has_head);
        store.inner.cache.remember_absent(&key, absent);
        let flushes = store.inner.journal.flushes();
        let version = store
            .append(&key, 0, &turn_events(1, "hi", None))
            .await
            .unwrap();
        assert_eq!(version, 1);
        // Its log lines and its first head are queued together: one flush covers both.
        assert_eq!(store.inner.journal.flushes(), flushes + 1);
        let (after, _) = store.inner.cache.take_weighed(&key).unwrap();
        assert!(after.has_head && after.head_end == after.log_end && after.log_end > 0);
        drop(store);
        let store = FileStore::open(root.path()).unwrap();
        let reloaded = store.load(&key, 20).await.unwrap();
        assert_eq!(reloaded.record.unwrap().version, 1);
        assert_eq!(reloaded.events.len(), 2);
    }
}
