//! An in-memory store for tests and demos: everything is lost on exit.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{
    check_continues, check_page, select_for_gc, GcPolicy, GcReport, LoadedSession, Page,
    PageRequest, SessionMeta, Store, StoreError,
};
use crate::key::SessionKey;
use crate::state::{apply_plain, Event, Seq, SessionRecord, SplitDelta, StateMap};

/// Keeps sessions in process memory. Cheap, fast, and gone when the process exits.
///
/// Sessions are spread over shards so that unrelated sessions rarely contend for a lock.
#[derive(Debug)]
pub struct MemoryStore {
    /// Session heads and logs, sharded by key hash.
    shards: Box<[Mutex<HashMap<SessionKey, StoredSession>>]>,
    /// Shared state, which outlives any one session.
    shared: Mutex<SharedState>,
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
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            shared: Mutex::new(SharedState::default()),
        }
    }

    fn shard(&self, key: &SessionKey) -> &Mutex<HashMap<SessionKey, StoredSession>> {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(key);
        &self.shards[(hash as usize) % SHARDS]
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
impl Store for MemoryStore {
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
        let mut split = SplitDelta::default();
        let version = {
            let mut shard = self.shard(key).lock();
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
}
