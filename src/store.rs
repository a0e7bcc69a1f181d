//! Where sessions are persisted: the [`Store`] trait, its reference implementation in memory
//! ([`InMemoryStore`]) and the conformance suite every implementation passes (`conformance`,
//! with the `testing` feature). The stores kept in files, Redis and PostgreSQL are in
//! [`crate::backend`], beside the other families kept on the same technology.
//!
//! Stores know the state model only — never actors, the registry, agents or HTTP. Around the
//! trait: [`read_log`] (a whole log, page by page), [`ForwardingStore`] (wrappers that override
//! only what they change) and [`FaultyStore`] (fault injection).

use std::time::Duration;

use async_trait::async_trait;

use crate::key::SessionKey;
use crate::state::{Event, Seq, SessionRecord, SessionStats, StateMap};

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod error;
mod faulty;
mod forward;
mod lease;
mod log;
mod memory;

pub use error::StoreError;
pub use faulty::{FaultyStore, StoreCall};
pub use forward::{ForwardingLeases, ForwardingStore};
pub use lease::{Claim, Claimant, Lease, Leases, Owner, Renewal};
pub use log::{read_log, LOG_PAGE};
pub use memory::InMemoryStore;

/// The session store in memory under its earlier name, which it shared with the trait
/// [`crate::memory::MemoryStore`] of memory across sessions.
#[deprecated(note = "renamed InMemoryStore")]
pub type MemoryStore = InMemoryStore;

/// Persistence for sessions. Object-safe: the runtime holds an `Arc<dyn Store>`.
///
/// Every write is **compare-and-set** on the session's version: it names the version it was
/// based on, and the store refuses it with [`StoreError::Conflict`] when the stored version
/// differs. A failed call leaves stored data as it was.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// A short name for logs and metrics (`"memory"`, `"file"`, `"redis"`, `"postgres"`).
    fn name(&self) -> &'static str;

    /// Loads a session's head and at most `window` of its newest events, with the user's and the
    /// application's shared state. Cost must not grow with the length of the log.
    ///
    /// A session that was never stored loads as `record: None` with no events (its user and app
    /// state are still returned). Corrupt data is [`StoreError::Corrupt`], a newer schema
    /// [`StoreError::Schema`]; neither is ever reported as an empty session.
    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError>;

    /// Appends the events one turn added and folds them into the head, atomically, if the stored
    /// version is `base_version` (0 for a session never stored). Returns the new version.
    ///
    /// Events must continue the log: the first one's `seq` is the head's `next_seq`. `user:` and
    /// `app:` keys in their deltas are merged into the user's and the application's shared state
    /// (last writer wins per key); `temp:` keys are never written. When this returns `Ok`, the
    /// write is durable to the degree the store promises (fsync'd for the file store).
    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError>;

    /// Reads at most `limit` events with `seq >= from`, oldest first. Missing session: empty.
    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError>;

    /// Removes a session's head and log. Returns whether it existed. Shared state is untouched.
    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError>;

    /// Lists a user's sessions as metadata, ordered by session id, without reading events.
    /// Pass `""` for anonymous sessions.
    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError>;

    /// Removes every session of a user and the user's shared state. Returns how many sessions
    /// were removed. Never touches another user's data.
    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError>;

    /// Removes sessions by age and count (see [`GcPolicy`]), judged at `now_ms`. The store does
    /// not know which sessions are live: the runtime's own `gc` skips those.
    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError>;

    /// Session leases kept in this store, for several processes sharing it with one owner per
    /// session. `None` (the default) for stores that one process owns alone.
    fn leases(&self) -> Option<std::sync::Arc<dyn Leases>> {
        None
    }

    /// [`Store::append`], fenced: it commits only if `lease` is the session's current lease
    /// and no writer with a newer epoch has written the session, checked in the same atomic
    /// step as the version compare-and-set. Refusals are [`StoreError::NotOwner`] and
    /// [`StoreError::Fenced`]; a stale version is still [`StoreError::Conflict`].
    ///
    /// Stores without [`Store::leases`] refuse every fenced write.
    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        let _ = (base_version, events, lease);
        Err(StoreError::InvalidRequest(format!(
            "session {key}: the {} store keeps no leases, so it cannot fence writes",
            self.name()
        )))
    }

    /// One cheap round trip to the store, for readiness: `Ok` when it answers now. The runtime
    /// probes with it ([`Runtime::readiness`](crate::Runtime::readiness)), so that a process
    /// cut off from its store stops saying it is ready. The default answers at once: a store in
    /// this process is reachable while the process is.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Confirms that `key`'s writes so far (its stored `version`) are on as many replicas as
    /// the store waits for with every append, or answers [`StoreError::NotReplicated`]. The
    /// runtime calls it before it answers a retry (same request id) from what is stored: the
    /// first answer may have been `NotReplicated`, and the retry must not acknowledge a turn
    /// that is still short of replicas. The default, for a store that waits for none, answers
    /// at once.
    async fn confirm_replicated(&self, key: &SessionKey, version: u64) -> Result<(), StoreError> {
        let _ = (key, version);
        Ok(())
    }
}

/// What a store hands back when a session is activated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedSession {
    /// The session's head, or `None` when it was never stored.
    pub record: Option<SessionRecord>,
    /// The newest events, oldest first: at most the `window` asked for.
    pub events: Vec<Event>,
    /// The user's `user:` state (keys without prefix); empty for anonymous sessions.
    pub user_state: StateMap,
    /// The application's `app:` state (keys without prefix).
    pub app_state: StateMap,
}

/// Metadata of a stored session, read without its events.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionMeta {
    /// The session.
    #[cfg_attr(feature = "http", schema(value_type = String))]
    pub key: SessionKey,
    /// Compare-and-set version of the stored head.
    pub version: u64,
    /// Number of events in the log.
    pub events: u64,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Last change, Unix milliseconds.
    pub updated_ms: u64,
    /// The session's counters.
    pub stats: SessionStats,
}

impl SessionMeta {
    /// The metadata of a stored head.
    pub fn of(record: &SessionRecord) -> Self {
        Self {
            key: record.key.clone(),
            version: record.version,
            events: record.next_seq.saturating_sub(1),
            created_ms: record.created_ms,
            updated_ms: record.updated_ms,
            stats: record.stats.clone(),
        }
    }
}

/// One page of a listing.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Page {
    /// Sessions on this page, ordered by session id.
    pub sessions: Vec<SessionMeta>,
    /// Pass this back to read the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// What to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many sessions (1 ..= [`MAX_PAGE`]).
    pub limit: usize,
    /// Resume after this cursor (from [`Page::next_cursor`]).
    pub cursor: Option<String>,
}

/// Largest page a store hands out, so that a listing never holds an unbounded result in memory.
pub const MAX_PAGE: usize = 1_000;

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            limit: 100,
            cursor: None,
        }
    }
}

/// Which sessions [`Store::gc`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcPolicy {
    /// Keep at most this many sessions, removing the least recently updated.
    pub max_sessions: Option<usize>,
    /// Remove sessions not updated for longer than this.
    pub max_age: Option<Duration>,
}

/// What [`Store::gc`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    /// The sessions removed.
    pub removed: Vec<SessionKey>,
}

/// Checks a page request against [`MAX_PAGE`].
pub(crate) fn check_page(page: &PageRequest) -> Result<(), StoreError> {
    if page.limit == 0 || page.limit > MAX_PAGE {
        return Err(StoreError::InvalidRequest(format!(
            "page limit {} is outside 1..={MAX_PAGE}",
            page.limit
        )));
    }
    Ok(())
}

/// Checks that `events` continue a log whose next sequence number is `next_seq`.
pub(crate) fn check_continues(
    key: &SessionKey,
    next_seq: Seq,
    events: &[Event],
) -> Result<(), StoreError> {
    for (expected, event) in (next_seq..).zip(events) {
        if event.seq != expected {
            return Err(StoreError::InvalidRequest(format!(
                "session {key}: event seq {} does not continue the log (expected {expected})",
                event.seq
            )));
        }
    }
    Ok(())
}

/// Chooses what [`Store::gc`] removes from `(key, updated_ms)` pairs: everything older than
/// `max_age`, then the least recently updated beyond `max_sessions`.
pub(crate) fn select_for_gc(
    mut sessions: Vec<(SessionKey, u64)>,
    policy: &GcPolicy,
    now_ms: u64,
) -> Vec<SessionKey> {
    let mut removed = Vec::new();
    if let Some(max_age) = policy.max_age {
        let cutoff = now_ms.saturating_sub(u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX));
        sessions.retain(|(key, updated)| {
            let expired = *updated < cutoff;
            if expired {
                removed.push(key.clone());
            }
            !expired
        });
    }
    if let Some(max) = policy.max_sessions {
        if sessions.len() > max {
            sessions.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            let excess = sessions.len() - max;
            removed.extend(sessions.into_iter().take(excess).map(|(key, _)| key));
        }
    }
    removed
}

/// An empty cache of up to `size` session heads that grows as it fills (`LruCache::new` would
/// reserve room for all of them at once): the Redis and PostgreSQL stores' kept heads.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn heads_cache<V>(size: std::num::NonZeroUsize) -> lru::LruCache<SessionKey, V> {
    let mut cache = lru::LruCache::unbounded();
    cache.resize(size);
    cache
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> SessionKey {
        SessionKey::new("u", s).unwrap()
    }

    #[test]
    fn gc_removes_the_old_then_the_least_recent_beyond_the_count() {
        let sessions = vec![
            (key("a"), 10),
            (key("b"), 500),
            (key("c"), 900),
            (key("d"), 800),
        ];
        let policy = GcPolicy {
            max_sessions: Some(2),
            max_age: Some(Duration::from_millis(600)),
        };
        let removed = select_for_gc(sessions, &policy, 1_000);
        assert_eq!(removed, vec![key("a"), key("b")]);
        let policy = GcPolicy {
            max_sessions: Some(1),
            max_age: None,
        };
        let removed = select_for_gc(vec![(key("x"), 5), (key("y"), 1)], &policy, 0);
        assert_eq!(removed, vec![key("y")]);
    }

    #[test]
    fn page_limits_are_checked() {
        let page = |limit| PageRequest {
            limit,
            cursor: None,
        };
        assert!(check_page(&page(0)).is_err());
        assert!(check_page(&page(MAX_PAGE + 1)).is_err());
        assert!(check_page(&page(1)).is_ok());
    }
}
