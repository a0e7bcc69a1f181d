//! What this process knows of the sessions it touched recently: each one's head with the log
//! folded in, and where its log ends — so that an append neither reads nor parses `head.json`.
//!
//! It can be trusted because a root is open in one process at a time (the lock file), and every
//! write to a session goes through this store under the session's lock, which keeps its entry up
//! to date or drops it. An entry is still checked against two `stat`s before use, so that a
//! file changed behind the store's back (a restored backup, a hand edit) is read again rather
//! than overwritten on stale knowledge.

use std::num::NonZeroUsize;

use lru::LruCache;
use parking_lot::Mutex;

use super::fsio::{len_or_zero, stamp_optional};
use super::layout::SessionPaths;
use super::log::{corrupt, read_current, Current};
use crate::key::SessionKey;
use crate::store::StoreError;

/// Sessions remembered. An entry is a head (typically a few KB: state and counters), so 4,096
/// cost a few MB at most; that covers the sessions a runtime keeps live at its default capacity
/// many times over, and the Redis store caches as many.
pub(super) const CACHED_SESSIONS: usize = 4_096;

/// The remembered sessions, least recently used evicted first.
#[derive(Debug)]
pub(super) struct HeadCache {
    /// Held only for a lookup or an update, never across I/O.
    entries: Mutex<LruCache<SessionKey, Current>>,
}

impl HeadCache {
    /// An empty cache of [`CACHED_SESSIONS`] entries.
    pub fn new() -> Self {
        let capacity = NonZeroUsize::new(CACHED_SESSIONS).expect("CACHED_SESSIONS is not zero");
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The session as its files hold it now: the remembered state if the files are unchanged
    /// since, else read from disk (and remembered). With `take`, the entry is removed and the
    /// caller puts back what it then writes ([`HeadCache::keep`]); a failure in between leaves
    /// nothing stale behind.
    ///
    /// A log shorter than what this process acknowledged is `Corrupt`, and the entry is kept so
    /// that every later call says so too: after a restart, a cut inside the appends past the
    /// head could no longer be told from a crash mid-append.
    pub fn current(
        &self,
        paths: &SessionPaths,
        key: &SessionKey,
        take: bool,
    ) -> Result<Current, StoreError> {
        let known = if take {
            self.entries.lock().pop(key)
        } else {
            self.entries.lock().get(key).cloned()
        };
        if let Some(known) = known {
            match unchanged(&known, paths, key) {
                Ok(true) => return Ok(known),
                Ok(false) => {}
                Err(e) => {
                    if take {
                        self.keep(key, known);
                    }
                    return Err(e);
                }
            }
        }
        self.forget(key);
        let current = read_current(paths, key)?;
        if !take {
            self.keep(key, current.clone());
        }
        Ok(current)
    }

    /// Like [`HeadCache::current`] without changing the cache: for listings and `gc`, which
    /// visit many sessions once and should not evict the live ones.
    pub fn peek_current(
        &self,
        paths: &SessionPaths,
        key: &SessionKey,
    ) -> Result<Current, StoreError> {
        let known = self.entries.lock().peek(key).cloned();
        if let Some(known) = known {
            if unchanged(&known, paths, key)? {
                return Ok(known);
            }
        }
        read_current(paths, key)
    }

    /// Remembers `current` as the session's state on disk (sessions with no head are not kept).
    pub fn keep(&self, key: &SessionKey, current: Current) {
        if current.record.is_some() {
            self.entries.lock().put(key.clone(), current);
        }
    }

    /// Forgets a session, after it was removed or its files' state became uncertain.
    pub fn forget(&self, key: &SessionKey) {
        self.entries.lock().pop(key);
    }

    /// Forgets every session of a user, after the user's folder was removed.
    pub fn forget_user(&self, user_id: &str) {
        let mut entries = self.entries.lock();
        let keys: Vec<SessionKey> = entries
            .iter()
            .filter(|(key, _)| key.user_id() == user_id)
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            entries.pop(&key);
        }
    }
}

/// Whether the files still are as `known` says: the same `head.json` and a log of the same
/// length. `Corrupt` if the log lost bytes this process acknowledged.
fn unchanged(known: &Current, paths: &SessionPaths, key: &SessionKey) -> Result<bool, StoreError> {
    let log_len = len_or_zero(&paths.log)?;
    if log_len < known.log_end {
        return Err(corrupt(
            key,
            &paths.log,
            format!(
                "the log is {log_len} bytes but {} were acknowledged; acknowledged events are missing",
                known.log_end
            ),
        ));
    }
    Ok(log_len == known.log_len && stamp_optional(&paths.head)? == known.head)
}
