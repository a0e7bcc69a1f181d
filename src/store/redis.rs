//! The Redis store, for several processes or hosts sharing sessions.
//!
//! The fold happens here in Rust; one Lua script checks the version and writes the turn (events,
//! head, indexes, shared state) atomically. See `docs/stores.md` for the key layout.

mod codec;
pub(crate) mod keys;
mod listing;
mod options;

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lru::LruCache;
use parking_lot::Mutex;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};

use self::codec::{
    corrupt, decode_events, decode_head, decode_state, push_delta, redis_error, unavailable,
    StoredHead,
};
use self::keys::{gc_member, Keys};
pub use self::options::RedisOptions;
use super::{
    check_continues, GcPolicy, GcReport, LoadedSession, Page, PageRequest, Store, StoreError,
};
use crate::key::SessionKey;
use crate::state::{Event, Seq, SessionRecord, SplitDelta, StateMap};

/// The fields of a head hash: version, record, epoch.
const HEAD_FIELDS: [&str; 3] = ["v", "r", "e"];

/// Heads kept by [`RedisStore`]'s cache: about the live sessions of a busy process, at a few
/// hundred bytes to a few KB each.
const HEAD_CACHE: usize = 4_096;

/// Stores sessions in Redis, shared by every process that connects with the same prefix.
///
/// Writes are compare-and-set on the session's version inside one Lua script, so concurrent
/// writers from several processes never lose an update. A Redis that is down or slow answers
/// [`StoreError::Unavailable`] within the configured timeouts; the connection reconnects by
/// itself. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisStore {
    /// Multiplexed and self-healing: clones share one connection, which reconnects on failure.
    conn: ConnectionManager,
    /// Names every key under the configured prefix.
    keys: Keys,
    /// Session expiry in milliseconds; 0 means none (the scripts' convention).
    ttl_ms: u64,
    /// Bound on one call as a whole: a reconnect attempt plus the command.
    deadline: Duration,
    /// `append.lua`: the compare-and-set write of one turn.
    append: Script,
    /// `delete.lua`: removal of one session, optionally only if gc's view is still current.
    delete: Script,
    /// Heads this process wrote or read last, so that an append based on one needs no read
    /// first (one round trip instead of two). Only a shortcut: the script still checks the
    /// version and epoch, and a stale entry ends in `Conflict`, never in a wrong write.
    heads: Arc<Mutex<LruCache<SessionKey, StoredHead>>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("keys", &self.keys)
            .field("ttl_ms", &self.ttl_ms)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`, `rediss://…`, `redis+unix://…`).
    ///
    /// Fails with [`StoreError::Unavailable`] if no connection is made within the connect
    /// timeout, and [`StoreError::InvalidRequest`] for a bad URL or prefix.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let keys = Keys::new(&options.prefix)?;
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::InvalidRequest(format!("redis url {url:?}: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            // Few, quick retries: callers would rather hear `Unavailable` than wait.
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let deadline = options.connect_timeout * 2 + options.response_timeout;
        let conn =
            tokio::time::timeout(deadline, ConnectionManager::new_with_config(client, config))
                .await
                .map_err(|_| unavailable(format!("no connection to {url} within {deadline:?}")))?
                .map_err(|e| unavailable(format!("connecting to {url}: {e}")))?;
        let ttl_ms = options.session_ttl.map_or(0, |ttl| {
            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        Ok(Self {
            conn,
            keys,
            ttl_ms,
            deadline,
            append: Script::new(include_str!("redis/append.lua")),
            delete: Script::new(include_str!("redis/delete.lua")),
            heads: Arc::new(Mutex::new(LruCache::new(
                NonZeroUsize::new(HEAD_CACHE).expect("HEAD_CACHE is not zero"),
            ))),
        })
    }

    /// Runs one Redis exchange within the store's deadline.
    async fn run<T>(
        &self,
        about: &str,
        exchange: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.deadline, exchange).await {
            Ok(result) => result.map_err(|e| redis_error(about, e)),
            Err(_) => Err(unavailable(format!("no answer within {:?}", self.deadline))),
        }
    }

    /// The stored head of `key`, if any.
    async fn head(&self, key: &SessionKey) -> Result<Option<StoredHead>, StoreError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("HMGET")
            .arg(self.keys.head(key))
            .arg(&HEAD_FIELDS[..])
            .to_owned();
        let fields = self
            .run(&key.to_string(), cmd.query_async(&mut conn))
            .await?;
        decode_head(key, fields)
    }

    /// Remembers (or, with `None`, forgets) the stored head of `key`.
    fn remember(&self, key: &SessionKey, head: Option<StoredHead>) {
        let mut heads = self.heads.lock();
        match head {
            Some(head) => {
                heads.put(key.clone(), head);
            }
            None => {
                heads.pop(key);
            }
        }
    }

    /// Runs the delete script for `key`; with `score`, only if gc's view is still current.
    async fn delete_one(&self, key: &SessionKey, score: Option<&str>) -> Result<bool, StoreError> {
        self.remember(key, None);
        let mut conn = self.conn.clone();
        let mut call = self.delete.prepare_invoke();
        call.key(self.keys.head(key))
            .key(self.keys.log(key))
            .key(self.keys.index(key.user_id()))
            .key(self.keys.gc())
            .arg(key.session_id())
            .arg(gc_member(key))
            .arg(score.unwrap_or(""));
        let removed: i64 = self
            .run(&key.to_string(), call.invoke_async(&mut conn))
            .await?;
        Ok(removed == 1)
    }
}

#[async_trait]
impl Store for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let mut conn = self.conn.clone();
        // LRANGE 1 0 is empty; `-0` would mean the whole list.
        let (start, stop) = match window {
            0 => (1, 0),
            n => (-(i64::try_from(n).unwrap_or(i64::MAX)), -1),
        };
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HMGET")
            .arg(self.keys.head(key))
            .arg(&HEAD_FIELDS[..])
            .cmd("LRANGE")
            .arg(self.keys.log(key))
            .arg(start)
            .arg(stop)
            .cmd("HGETALL")
            .arg(self.keys.user_state(key.user_id()))
            .cmd("HGETALL")
            .arg(self.keys.app());
        type Reply = (
            (Option<String>, Option<String>, Option<String>),
            Vec<String>,
            HashMap<String, String>,
            HashMap<String, String>,
        );
        let (head, raw_events, user, app): Reply = self
            .run(&key.to_string(), pipe.query_async(&mut conn))
            .await?;
        let head = decode_head(key, head)?;
        self.remember(key, head.clone());
        let record = head.map(|h| h.record);
        let events = decode_events(key, raw_events)?;
        let next_seq = record.as_ref().map_or(1, |r| r.next_seq);
        let dense = events.windows(2).all(|w| w[1].seq == w[0].seq + 1);
        if !dense || events.last().is_some_and(|e| e.seq + 1 != next_seq) {
            return Err(corrupt(
                key,
                "the log's newest events do not match the head",
            ));
        }
        Ok(LoadedSession {
            record,
            events,
            user_state: if key.is_anonymous() {
                StateMap::new()
            } else {
                decode_state(key, user)?
            },
            app_state: decode_state(key, app)?,
        })
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        let cached = self.heads.lock().get(key).cloned();
        let stored = match cached.filter(|h| h.record.version == base_version) {
            Some(head) => Some(head),
            None => {
                let stored = self.head(key).await?;
                let found = stored.as_ref().map_or(0, |h| h.record.version);
                if found != base_version {
                    self.remember(key, stored);
                    return Err(StoreError::Conflict {
                        key: key.clone(),
                        expected: base_version,
                        found,
                    });
                }
                stored
            }
        };
        let (mut record, epoch) = match stored {
            Some(head) => (head.record, head.epoch),
            None => (
                SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
                uuid::Uuid::new_v4().simple().to_string(),
            ),
        };
        check_continues(key, record.next_seq, events)?;
        let mut shared = SplitDelta::default();
        let mut lines = Vec::with_capacity(events.len());
        for event in events {
            record.apply(event);
            if let Some(delta) = &event.state_delta {
                shared.merge(SplitDelta::from_delta(delta));
            }
            lines.push(serde_json::to_string(event).map_err(|e| {
                StoreError::InvalidRequest(format!(
                    "session {key}: event cannot be serialised: {e}"
                ))
            })?);
        }
        if key.is_anonymous() {
            shared.user.clear();
        }
        record.version = base_version + 1;
        let record_json = serde_json::to_string(&record)
            .map_err(|e| corrupt(key, format!("the head cannot be serialised: {e}")))?;

        let mut call = self.append.prepare_invoke();
        call.key(self.keys.head(key))
            .key(self.keys.log(key))
            .key(self.keys.index(key.user_id()))
            .key(self.keys.user_state(key.user_id()))
            .key(self.keys.app())
            .key(self.keys.gc())
            .arg(base_version)
            .arg(&epoch)
            .arg(record.version)
            .arg(record_json)
            .arg(key.session_id())
            .arg(gc_member(key))
            .arg(record.updated_ms)
            .arg(self.ttl_ms)
            .arg(lines.len())
            .arg(&lines);
        push_delta(&mut call, &shared.user);
        push_delta(&mut call, &shared.app);
        let mut conn = self.conn.clone();
        // Whatever happens next, the cached head is no longer known to be current.
        self.remember(key, None);
        let (applied, version): (i64, String) = self
            .run(&key.to_string(), call.invoke_async(&mut conn))
            .await?;
        let version: u64 = version
            .parse()
            .map_err(|_| corrupt(key, format!("stored version {version:?} is not a number")))?;
        if applied == 1 {
            self.remember(key, Some(StoredHead { record, epoch }));
            Ok(version)
        } else {
            Err(StoreError::Conflict {
                key: key.clone(),
                expected: base_version,
                found: version,
            })
        }
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Sequence numbers start at 1 and are dense, so `seq` is list index + 1.
        let start = i64::try_from(from.saturating_sub(1)).unwrap_or(i64::MAX);
        let stop = i64::try_from(limit)
            .ok()
            .and_then(|l| start.checked_add(l - 1))
            .unwrap_or(-1);
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("LRANGE")
            .arg(self.keys.log(key))
            .arg(start)
            .arg(stop)
            .to_owned();
        let raw: Vec<String> = self
            .run(&key.to_string(), cmd.query_async(&mut conn))
            .await?;
        decode_events(key, raw)
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        self.delete_one(key, None).await
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        self.list_page(user_id, page).await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        self.delete_user_sessions(user_id).await
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        self.collect(policy, now_ms).await
    }
}
