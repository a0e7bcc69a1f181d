//! What this process knows of the sessions it touched recently: each one's head with the log
//! folded in, and where its log ends — so that an append neither reads nor parses `head.json`.
//!
//! It can be trusted because a root is open in one process at a time (the lock file), and every
//! write to a session goes through this store under the session's lock, which keeps its entry up
//! to date or drops it. It is the only place that knows a session's newest state before the
//! journal's writes behind reach its files, so an append uses it without looking at them; a
//! file changed behind a running store's back is found when those writes reach it
//! (`journal/behind.rs`).

use lru::LruCache;
use parking_lot::Mutex;

use super::layout::SessionPaths;
use super::log::{corrupt, read_current, Current};
use crate::key::SessionKey;
use crate::state::SessionRecord;
use crate::store::StoreError;

/// Bytes of heads remembered, weighed as [`weight`] does (about their size as `head.json`).
///
/// A head is the session's state and counters — typically a few KB, but a session's state can
/// grow large (an agent keeping documents or long tool output in it), so counting entries would
/// not bound memory. 32 MiB holds some 4,000 heads of 8 KB — the sessions a runtime keeps live
/// at its default capacity many times over, and as many as the Redis store caches — while a
/// few huge heads only push older entries out. An entry heavier than the whole budget is not
/// kept: that session's appends read its files instead (one head parse and the appends past it).
pub(super) const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// What an entry costs beside its head's JSON: the key (twice, in the map and in the record),
/// the map's node and the [`Current`] fields, rounded up.
const ENTRY_OVERHEAD: usize = 256;

/// The remembered sessions, least recently used evicted first once their weight passes the
/// budget.
#[derive(Debug)]
pub(super) struct HeadCache {
    /// Held only for a lookup or an update, never across I/O.
    entries: Mutex<Entries>,
}

/// The map and its running weight.
#[derive(Debug)]
struct Entries {
    map: LruCache<SessionKey, (Current, usize)>,
    /// Sum of the weights in `map`; at most `budget`.
    bytes: usize,
    budget: usize,
}

impl Entries {
    fn get(&mut self, key: &SessionKey) -> Option<Current> {
        self.map.get(key).map(|(current, _)| current.clone())
    }

    fn peek(&self, key: &SessionKey) -> Option<Current> {
        self.map.peek(key).map(|(current, _)| current.clone())
    }

    fn pop(&mut self, key: &SessionKey) -> Option<Current> {
        let (current, weight) = self.map.pop(key)?;
        self.bytes -= weight;
        Some(current)
    }

    fn put(&mut self, key: SessionKey, current: Current, weight: usize) {
        self.pop(&key);
        if weight > self.budget {
            return;
        }
        self.bytes += weight;
        self.map.put(key, (current, weight));
        while self.bytes > self.budget {
            match self.map.pop_lru() {
                Some((_, (_, evicted))) => self.bytes -= evicted,
                None => break,
            }
        }
    }
}

/// What remembering a session costs, in bytes: its head's size as JSON plus a fixed overhead.
/// Counted by serialising into a counter, which allocates nothing.
fn weight(key: &SessionKey, record: &SessionRecord) -> usize {
    let mut counter = Counter(0);
    // A record that does not serialise is never written either; weigh it as its overhead.
    let _ = serde_json::to_writer(&mut counter, record);
    counter.0 + key.to_string().len() + ENTRY_OVERHEAD
}

/// A writer that only counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl HeadCache {
    /// An empty cache of [`CACHE_BYTES`].
    pub(super) fn new() -> Self {
        Self::with_budget(CACHE_BYTES)
    }

    /// An empty cache that remembers at most `budget` bytes of heads.
    fn with_budget(budget: usize) -> Self {
        Self {
            entries: Mutex::new(Entries {
                map: LruCache::unbounded(),
                bytes: 0,
                budget,
            }),
        }
    }

    /// The remembered state of a session, taken out of the cache: the caller puts back what it
    /// then writes ([`HeadCache::keep`]), so a failure in between leaves nothing stale behind.
    /// Comes with the weight the entry was kept at (for [`HeadCache::keep_appended`]).
    pub(super) fn take_weighed(&self, key: &SessionKey) -> Option<(Current, usize)> {
        let mut entries = self.entries.lock();
        let (current, weight) = entries.map.pop(key)?;
        entries.bytes -= weight;
        Some((current, weight))
    }

    /// The session as its files hold it, for a read (which the caller has brought up to date
    /// with the journal): read from them, so that a file changed behind the store's back is
    /// seen, and remembered. A log shorter than what this process acknowledged is `Corrupt`, and
    /// remembered as damage, so that every later call says so too: after a restart, a cut inside
    /// the appends past the head could no longer be told from a crash mid-append.
    pub(super) fn current(
        &self,
        paths: &SessionPaths,
        key: &SessionKey,
    ) -> Result<Current, StoreError> {
        let known = self.entries.lock().get(key);
        if let Some(damage) = known.as_ref().and_then(|known| known.damage.clone()) {
            return Err(corrupt(key, &paths.log, damage));
        }
        let found = match read_current(paths, key) {
            Ok(found) => found,
            Err(e) => {
                self.forget(key);
                return Err(e);
            }
        };
        if let Some(mut known) = known.filter(|known| found.log_len < known.log_end) {
            let damage = format!(
                "the log is {} bytes but {} were acknowledged; acknowledged events are missing",
                found.log_len, known.log_end
            );
            known.damage = Some(damage.clone());
            self.keep(key, known);
            return Err(corrupt(key, &paths.log, damage));
        }
        self.keep(key, found.clone());
        Ok(found)
    }

    /// Like [`HeadCache::current`] without changing the cache: for listings and `gc`, which
    /// visit many sessions once and should not evict the live ones.
    pub(super) fn peek_current(
        &self,
        paths: &SessionPaths,
        key: &SessionKey,
    ) -> Result<Current, StoreError> {
        if let Some(known) = self.entries.lock().peek(key) {
            return Ok(known);
        }
        read_current(paths, key)
    }

    /// Remembers `current` as the session's state on disk (sessions with no head are not kept:
    /// see [`HeadCache::remember_absent`]), evicting the least recently used sessions while the
    /// cache weighs more than its budget.
    pub(super) fn keep(&self, key: &SessionKey, current: Current) {
        let Some(record) = &current.record else {
            return;
        };
        // Weighed before taking the lock: serialising a large head takes a while.
        let weight = weight(key, record);
        self.entries.lock().put(key.clone(), current, weight);
    }

    /// Remembers that a load found no session `key` (`current` has no record), weighed as its
    /// key and overhead: a load that finds none is usually followed by the session's first
    /// append, which then need not look at its files again. Only a load calls this, after
    /// checking the session's paths for links, so that lookups of sessions that do not exist
    /// (a read of made-up ids) do not push live heads out.
    pub(super) fn remember_absent(&self, key: &SessionKey, current: Current) {
        if current.record.is_some() {
            return self.keep(key, current);
        }
        let weight = key.to_string().len() + ENTRY_OVERHEAD;
        self.entries.lock().put(key.clone(), current, weight);
    }

    /// Remembers `current` after an append to a session that weighed `before` when it was
    /// taken, without serialising its record on every append: `grew` is what the append's
    /// events could add to the record (see [`super::session::record_growth`]), or `None` when
    /// they may have changed it in larger ways (state, a summary), and then, or when `before`
    /// is not known, or its head was just rewritten, the record is weighed again.
    pub(super) fn keep_appended(
        &self,
        key: &SessionKey,
        current: Current,
        before: Option<usize>,
        grew: Option<usize>,
    ) {
        let headed = current.has_head && current.head_end == current.log_end;
        match (before, grew) {
            (Some(before), Some(grew)) if !headed && current.record.is_some() => {
                let weight = before.saturating_add(grew);
                self.entries.lock().put(key.clone(), current, weight);
            }
            _ => self.keep(key, current),
        }
    }

    /// Forgets a session, after it was removed or its files' state became uncertain.
    pub(super) fn forget(&self, key: &SessionKey) {
        self.entries.lock().pop(key);
    }

    /// Forgets every session of a user, after the user's folder was removed.
    pub(super) fn forget_user(&self, user_id: &str) {
        let mut entries = self.entries.lock();
        let keys: Vec<SessionKey> = entries
            .map
            .iter()
            .filter(|(key, _)| key.user_id() == user_id)
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            entries.pop(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(n: usize) -> SessionKey {
        SessionKey::new("u", format!("s{n}")).unwrap()
    }

    /// A session whose state holds a string of `size` bytes.
    fn current(n: usize, size: usize) -> Current {
        let mut record = SessionRecord::new(key(n), 0);
        record
            .state
            .insert("blob".to_owned(), json!("x".repeat(size)));
        Current {
            record: Some(record),
            log_end: 0,
            log_len: 0,
            head_end: 0,
            unheaded: 0,
            has_head: true,
            damage: None,
        }
    }

    fn weight_of(n: usize, size: usize) -> usize {
        weight(&key(n), current(n, size).record.as_ref().unwrap())
    }

    fn kept(cache: &HeadCache) -> Vec<usize> {
        let entries = cache.entries.lock();
        let mut kept: Vec<usize> = entries
            .map
            .iter()
            .map(|(k, _)| k.session_id()[1..].parse().unwrap())
            .collect();
        kept.sort_unstable();
        kept
    }

    fn bytes(cache: &HeadCache) -> usize {
        cache.entries.lock().bytes
    }

    #[test]
    fn an_entry_weighs_about_its_head_on_disk() {
        let current = current(1, 10_000);
        let record = current.record.as_ref().unwrap();
        let json = serde_json::to_vec(record).unwrap().len();
        assert!(json > 10_000);
        assert_eq!(
            weight(&key(1), record),
            json + "u/s1".len() + ENTRY_OVERHEAD
        );
    }

    #[test]
    fn the_least_recently_used_heads_go_once_the_byte_budget_is_passed() {
        let size = 10_000;
        let one = weight_of(1, size);
        // Room for three entries of this size, not four.
        let cache = HeadCache::with_budget(3 * one + one / 2);
        for n in 1..=3 {
            cache.keep(&key(n), current(n, size));
        }
        assert_eq!(kept(&cache), [1, 2, 3]);
        // Using 1 makes 2 the least recently used.
        assert!(cache.entries.lock().get(&key(1)).is_some());
        cache.keep(&key(4), current(4, size));
        assert_eq!(kept(&cache), [1, 3, 4]);
        assert_eq!(bytes(&cache), 3 * one);
        // One entry about twice as heavy pushes out as many as it takes: here two.
        let heavy = weight_of(5, 2 * size);
        cache.keep(&key(5), current(5, 2 * size));
        assert!(bytes(&cache) <= 3 * one + one / 2);
        assert_eq!(kept(&cache), [4, 5]);
        assert_eq!(bytes(&cache), one + heavy);
    }

    #[test]
    fn an_append_adds_what_it_could_grow_the_record_by_until_the_head_is_rewritten() {
        let cache = HeadCache::new();
        let (one, grown) = (weight_of(1, 1_000), weight_of(1, 5_000));
        cache.keep(&key(1), current(1, 1_000));
        // An append that cannot grow the record much (no state, no summary): its allowance.
        let (_, before) = cache.take_weighed(&key(1)).unwrap();
        assert_eq!(before, one);
        let mut after = current(1, 1_000);
        after.log_end = 4_200;
        cache.keep_appended(&key(1), after, Some(before), Some(64));
        assert_eq!(bytes(&cache), one + 64);
        // One that changed the state (here by 4,000 bytes): weighed again, exactly.
        let (_, before) = cache.take_weighed(&key(1)).unwrap();
        let mut changed = current(1, 5_000);
        changed.log_end = 8_400;
        cache.keep_appended(&key(1), changed, Some(before), None);
        assert_eq!(bytes(&cache), grown);
        // The head was just rewritten: weighed again, whatever the append's allowance.
        let (_, before) = cache.take_weighed(&key(1)).unwrap();
        assert_eq!(bytes(&cache), 0);
        let mut headed = current(1, 5_000);
        (headed.log_end, headed.head_end) = (8_500, 8_500);
        cache.keep_appended(&key(1), headed, Some(before + 1_000), Some(64));
        assert_eq!(bytes(&cache), grown);
        // Taken without a known weight (read from the files): weighed.
        cache.take_weighed(&key(1)).unwrap();
        let mut unheaded = current(1, 5_000);
        unheaded.log_end = 8_600;
        cache.keep_appended(&key(1), unheaded, None, Some(64));
        assert_eq!(bytes(&cache), grown);
    }

    #[test]
    fn only_a_load_remembers_a_session_that_is_not_there() {
        let cache = HeadCache::new();
        let mut absent = current(1, 0);
        absent.record = None;
        absent.has_head = false;
        cache.keep(&key(1), absent.clone());
        assert!(cache.take_weighed(&key(1)).is_none(), "a read does not");
        cache.remember_absent(&key(1), absent);
        let (found, weight) = cache.take_weighed(&key(1)).unwrap();
        assert!(found.record.is_none());
        assert_eq!(weight, "u/s1".len() + ENTRY_OVERHEAD);
    }

    #[test]
    fn a_head_heavier_than_the_whole_budget_is_not_kept_and_evicts_nothing() {
        let one = weight_of(1, 1_000);
        let cache = HeadCache::with_budget(4 * one);
        cache.keep(&key(1), current(1, 1_000));
        cache.keep(&key(2), current(2, 10_000));
        assert_eq!(kept(&cache), [1]);
        assert_eq!(bytes(&cache), one);
    }

    #[test]
    fn replacing_and_forgetting_entries_keeps_the_weight_exact() {
        let cache = HeadCache::with_budget(1 << 20);
        cache.keep(&key(1), current(1, 1_000));
        cache.keep(&key(1), current(1, 5_000));
        assert_eq!(bytes(&cache), weight_of(1, 5_000));
        cache.keep(&key(2), current(2, 2_000));
        cache.forget(&key(1));
        assert_eq!(bytes(&cache), weight_of(2, 2_000));
        cache.forget_user("u");
        assert_eq!((bytes(&cache), kept(&cache).len()), (0, 0));
    }
}
