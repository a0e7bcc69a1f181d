//! An in-memory store for tests and demos: everything is lost on exit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use self::leases::MemoryLeases;
use super::{
    check_continues, check_page, select_for_gc, GcPolicy, GcReport, Lease, Leases, LoadedSession,
    Page, PageRequest, SessionMeta, Store, StoreError,
};
use crate::key::SessionKey;
use crate::state::{apply_plain, Event, Seq, SessionRecord, SplitDelta, StateMap};

mod leases;

/// Keeps sessions in process memory. Cheap, fast, and gone when the process exits.
///
/// Sessions are spread over shards so that unrelated sessions rarely contend for a lock. It
/// keeps [`Leases`] too, so that several runtimes in one process can share it with one owner
/// per session, as processes share a Redis.
#[derive(Debug)]
pub struct InMemoryStore {
    /// Session heads and logs, sharded by key hash.
    shards: Box<[Mutex<HashMap<SessionKey, StoredSession>>]>,
    /// Shared state, which outlives any one session.
    shared: Mutex<SharedState>,
    /// Session leases (see [`Store::leases`]).
    leases: Arc<MemoryLeases>,
}

/// How many shards; a power of two comfortably above the core count of typical hosts.
const SHARDS: usize = 32;

#[derive(Debug, Default)]
struct SharedState {
    users: HashMap<String, StateMap>,
    app: StateMap,
}

#[derive(Debug)]
struct StoredSession {
    record: SessionRecord,
    events: Vec<Event>,
    /// The newest lease epoch that wrote the session (0: only unfenced writes).
    fence: u64,
}

impl Default for InMemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            shared: Mutex::new(SharedState::default()),
            leases: Arc::default(),
        }
    }

    fn shard(&self, key: &SessionKey) -> &Mutex<HashMap<SessionKey, StoredSession>> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(key);
        &self.shards[(hash as usize) % SHARDS]
    }

    /// Appends one turn if the stored version is `base_version` and, for a fenced write, if
    /// no newer epoch has written the session.
    fn commit(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        fence: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        let mut split = SplitDelta::default();
        let version = {
            let mut shard = self.shard(key).lock();
            let stored_fence = shard.get(key).map_or(0, |s| s.fence);
            if let Some(lease) = fence.filter(|lease| lease.epoch < stored_fence) {
                return Err(StoreError::Fenced {
                    key: key.clone(),
                    epoch: lease.epoch,
                    current: stored_fence,
                });
            }
            let found = shard.get(key).map_or(0, |s| s.record.version);
            if found != base_version {
                return Err(StoreError::Conflict {
                    key: key.clone(),
                    expected: base_version,
                    found,
                });
            }
            let stored = shard.entry(key.clone()).or_insert_with(|| StoredSession {
                record: SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
                events: Vec::new(),
                fence: 0,
            });
            check_continues(key, stored.record.next_seq, events)?;
            for event in events {
                stored.record.apply(event);
                if let Some(delta) = &event.state_delta {
                    split.merge(SplitDelta::from_delta(delta));
                }
            }
            stored.events.extend_from_slice(events);
            stored.record.version += 1;
            if let Some(lease) = fence {
                stored.fence = lease.epoch;
            }
            stored.record.version
        };
        if !split.user.is_empty() || !split.app.is_empty() {
            let mut shared = self.shared.lock();
            if !key.is_anonymous() && !split.user.is_empty() {
                let user = shared.users.entry(key.user_id().to_owned()).or_default();
                apply_plain(user, &split.user);
            }
            apply_plain(&mut shared.app, &split.app);
        }
        Ok(version)
    }

    fn all_sessions<T>(&self, mut pick: impl FnMut(&StoredSession) -> Option<T>) -> Vec<T> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().values().filter_map(&mut pick));
        }
        out
    }
}

#[async_trait]
impl Store for InMemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let (record, events) = match self.shard(key).lock().get(key) {
            Some(stored) => {
                let start = stored.events.len().saturating_sub(window);
                (Some(stored.record.clone()), stored.events[start..].to_vec())
            }
            None => (None, Vec::new()),
        };
        let shared = self.shared.lock();
        let user_state = if key.is_anonymous() {
            StateMap::new()
        } else {
            shared.users.get(key.user_id()).cloned().unwrap_or_default()
        };
        Ok(LoadedSession {
            record,
            events,
            user_state,
            app_state: shared.app.clone(),
        })
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.commit(key, base_version, events, None)
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let shard = self.shard(key).lock();
        let Some(stored) = shard.get(key) else {
            return Ok(Vec::new());
        };
        // Sequence numbers start at 1 and are dense, so `seq` locates its event directly.
        let start = usize::try_from(from.saturating_sub(1)).unwrap_or(usize::MAX);
        Ok(stored
            .events
            .iter()
            .skip(start)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        Ok(self.shard(key).lock().remove(key).is_some())
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        check_page(page)?;
        let mut metas: BTreeMap<String, SessionMeta> = self
            .all_sessions(|s| {
                let after_cursor = page
                    .cursor
                    .as_deref()
                    .is_none_or(|c| s.record.key.session_id() > c);
                (s.record.key.user_id() == user_id && after_cursor).then(|| {
                    (
                        s.record.key.session_id().to_owned(),
                        SessionMeta::of(&s.record),
                    )
                })
            })
            .into_iter()
            .collect();
        let more = metas.len() > page.limit;
        let sessions: Vec<SessionMeta> = std::mem::take(&mut metas)
            .into_values()
            .take(page.limit)
            .collect();
        let next_cursor = more
            .then(|| sessions.last().map(|m| m.key.session_id().to_owned()))
            .flatten();
        Ok(Page {
            sessions,
            next_cursor,
        })
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let before = shard.len();
            shard.retain(|key, _| key.user_id() != user_id);
            removed += (before - shard.len()) as u64;
        }
        self.shared.lock().users.remove(user_id);
        Ok(removed)
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        let sessions = self.all_sessions(|s| Some((s.record.key.clone(), s.record.updated_ms)));
        let removed = select_for_gc(sessions, policy, now_ms);
        for key in &removed {
            self.shard(key).lock().remove(key);
        }
        Ok(GcReport { removed })
    }

    fn leases(&self) -> Option<Arc<dyn Leases>> {
        Some(self.leases.clone())
    }

    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        // Held across the write, so that no grant or expiry check interleaves with it.
        let leases = self.leases.lock();
        leases.check(key, lease)?;
        self.commit(key, base_version, events, Some(lease))
    }
}
