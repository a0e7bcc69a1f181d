//! The Redis store, for several processes or hosts sharing sessions.
//!
//! The fold happens here in Rust; one Lua script checks the version and writes the turn's events
//! and head atomically, all in the session's own hash slot, so the store runs on a standalone
//! Redis and on Redis Cluster alike. Shared state and indexes follow in separate commands. See
//! `docs/stores.md` for the key layout and what is promised when a follow-up write fails.

mod append;
mod codec;
pub(crate) mod keys;
mod layout;
mod leases;
mod listing;
mod replicated;

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lru::LruCache;
use parking_lot::Mutex;
use redis::{RedisError, Script};

use self::codec::{corrupt, decode_events, decode_head, decode_state, StoredHead};
use self::keys::{gc_member, Keys, SessionKeys};
use self::replicated::Replicated;
use super::conn::{self, Connection};
use super::errors::{self, redis_error};
use super::options::{self, RedisOptions};
use crate::key::SessionKey;
use crate::state::{Event, Seq, SplitDelta, StateMap};
use crate::store::{
    GcPolicy, GcReport, Lease, Leases, LoadedSession, Page, PageRequest, Store, StoreError,
};

/// Sessions whose unsent shared-state changes are kept for their next append: only those whose
/// follow-up writes failed, a few even while Redis is failing over.
const UNSENT_CACHE: NonZeroUsize = NonZeroUsize::new(4_096).expect("not zero");

/// Most events a session's log may hold past its head's checkpoint: an append that would leave
/// more writes a new checkpoint. Bounds what a load (or a listing) reads beyond its window and
/// folds, while most appends write a few small fields instead of the whole record.
const CHECKPOINT_EVENTS: u64 = 64;

/// Stores sessions in Redis or Redis Cluster, shared by every process that connects with the
/// same prefix.
///
/// Writes are compare-and-set on the session's version inside one Lua script, so concurrent
/// writers from several processes never lose an update. A Redis that is down or slow answers
/// [`StoreError::Unavailable`] within the configured timeouts; the connection reconnects by
/// itself. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct RedisStore {
    /// Multiplexed and self-healing: clones share one connection (one per node on a Cluster).
    conn: Connection,
    /// Names every key under the configured prefix.
    keys: Keys,
    /// Session expiry in milliseconds; 0 means none (the scripts' convention).
    ttl_ms: u64,
    /// Bound on one call as a whole: a reconnect attempt plus the command.
    deadline: Duration,
    /// The Lua scripts, each run on one session's slot.
    scripts: Arc<Scripts>,
    /// Heads this process wrote or read last, so that an append based on one needs no read
    /// first (one round trip instead of two). Only a shortcut: the script still checks the
    /// version and epoch, and a stale entry ends in `Conflict`, never in a wrong write.
    heads: Arc<Mutex<LruCache<SessionKey, HeadSlot>>>,
    /// `user:` and `app:` changes of committed appends whose write after the commit failed,
    /// per session: sent again, under newer changes, with the session's next append.
    unsent: Arc<Mutex<LruCache<SessionKey, SplitDelta>>>,
    /// With `replicas=N`: the dedicated connections appends commit and `WAIT` on.
    replicated: Option<Arc<Replicated>>,
}

/// The store's Lua scripts. Each touches the keys of one session only (one hash slot).
struct Scripts {
    /// `append.lua`: the compare-and-set (and, with a lease, fenced) write of one turn.
    append: Script,
    /// `load.lua`: a head and its log's tail, read atomically.
    load: Script,
    /// `delete.lua`: removal of one session, optionally only if gc's view is still current.
    delete: Script,
    /// `claim.lua`: takes a session's lease and, when asked, reads the session with it.
    claim: Script,
    /// `renew.lua`: extends a lease still held with its token.
    renew: Script,
    /// `release.lua`: deletes a lease still held with its token.
    release: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            append: Script::new(include_str!("sessions/append.lua")),
            load: Script::new(concat!(
                include_str!("sessions/read.lua"),
                include_str!("sessions/load.lua")
            )),
            delete: Script::new(include_str!("sessions/delete.lua")),
            claim: Script::new(concat!(
                include_str!("sessions/read.lua"),
                include_str!("sessions/claim.lua")
            )),
            renew: Script::new(include_str!("sessions/renew.lua")),
            release: Script::new(include_str!("sessions/release.lua")),
        }
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("keys", &self.keys)
            .field("ttl_ms", &self.ttl_ms)
            .field(
                "replicas",
                &self.replicated.as_ref().map_or(0, |r| r.wanted),
            )
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url`: a server (`redis://host:port/db`, `rediss://…`, `redis+unix://…`) or a
    /// Redis Cluster (`redis+cluster://host:port[,host:port…]`, `rediss+cluster://…`). The URL
    /// may carry `replicas=N`, `replica_timeout_ms=MS`, `replica_connections=N`,
    /// `replica_policy=strict|degrade`, `lanes=N`, `head_cache=N` and `upgrade_from=2`, which
    /// override `options` (see [`RedisOptions::with_replicas`], [`RedisOptions::with_lanes`],
    /// [`RedisOptions::with_head_cache`] and [`RedisOptions::with_upgrade_from`]).
    ///
    /// Fails with [`StoreError::Unavailable`] if no connection is made within the connect
    /// timeout, [`StoreError::InvalidRequest`] for a bad URL, prefix, lanes or replica setting
    /// (lanes in a Cluster URL, or a replica's URL, included) or for data of the older, unversioned
    /// layout under the prefix, or of layout 2 unless `upgrade_from=2` says to take it over
    /// ([`RedisOptions::with_upgrade_from`]), [`StoreError::NewerLayout`] when a newer
    /// turnstile laid out the prefix, and [`StoreError::Corrupt`] when its layout mark is not a
    /// number.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        if options::has_parameter(url, "lanes") && conn::cluster_nodes(url).is_some() {
            return Err(StoreError::InvalidRequest(
                "redis lanes= is for a single server; a Redis Cluster connection keeps one \
                 connection per node"
                    .into(),
            ));
        }
        let (url, options) = options::split_url(url, options)?;
        options.check()?;
        let keys = Keys::new(&options.prefix)?;
        let deadline = options.connect_timeout * 2 + options.response_timeout;
        let scripts = Scripts::new();
        let conn = conn::connect(&url, &options, deadline).await?;
        let replicated = Replicated::new(&url, &options, scripts.append.clone(), conn.cluster())?;
        let ttl_ms = options.session_ttl.map_or(0, |ttl| {
            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        let cache_size = NonZeroUsize::new(options.head_cache).expect("checked: at least 1");
        let store = Self {
            conn,
            keys,
            ttl_ms,
            deadline,
            scripts: Arc::new(scripts),
            heads: Arc::new(Mutex::new(crate::store::heads_cache(cache_size))),
            unsent: Arc::new(Mutex::new(LruCache::new(UNSENT_CACHE))),
            replicated: replicated.map(Arc::new),
        };
        // First: on a replica, the layout check's first write would fail less clearly.
        if let Some(replicated) = &store.replicated {
            replicated.check_primary().await?;
        }
        store.check_layout(options.upgrade_from).await?;
        Ok(store)
    }

    /// Runs one Redis exchange within the store's deadline. `about` (a session, a user…)
    /// names what an error concerns; it is only formatted on an error.
    /// The store's connection, for a family of your own kept beside the sessions (see
    /// [`super::kit`]): clones share it, and with it its reconnections and timeouts.
    pub fn connection(&self) -> super::kit::RedisConnection {
        self.conn.clone().into()
    }

    /// The prefix every key of the store starts with; a family of your own keeps its keys
    /// under it (`<prefix>:<family>:…`) so that one Redis holds a deployment's data apart from
    /// another's.
    pub fn prefix(&self) -> &str {
        self.keys.prefix()
    }

    async fn run<T, A: std::fmt::Display + Sync + ?Sized>(
        &self,
        about: &A,
        exchange: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.deadline, exchange).await {
            Ok(result) => result.map_err(|e| redis_error(&about.to_string(), e)),
            Err(_) => Err(errors::unavailable(format!(
                "no answer within {:?}",
                self.deadline
            ))),
        }
    }

    /// The keys of one session.
    fn session_keys(&self, key: &SessionKey) -> SessionKeys {
        self.keys.session(key)
    }

    /// Reads a session's head and at least `window` of its newest events (all the events past
    /// its checkpoint, in any case) in one atomic step. Checks that they agree.
    async fn read_session(
        &self,
        key: &SessionKey,
        window: usize,
    ) -> Result<ReadSession, StoreError> {
        let names = self.session_keys(key);
        // Lua numbers are doubles: a count past any real log, kept exact as a Lua integer.
        let count = window.min(1 << 40);
        let mut call = self.scripts.load.prepare_invoke();
        call.key(&names.head).key(&names.log).arg(count);
        let mut conn = self.conn.for_session(key);
        let (fields, raw): (Vec<Option<String>>, Vec<String>) =
            self.run(key, call.invoke_async(&mut conn)).await?;
        read_back(key, window, fields, raw)
    }

    /// A session as [`Store::load`] answers it: `read` (a load's read, or what a claim read)
    /// with the user's and the application's state, read at the same time. Remembers the head
    /// for the session's next append.
    async fn loaded(
        &self,
        key: &SessionKey,
        window: usize,
        read: impl Future<Output = Result<ReadSession, StoreError>>,
    ) -> Result<LoadedSession, StoreError> {
        let user_state = async {
            if key.is_anonymous() {
                return Ok(HashMap::new());
            }
            let mut conn = self.conn.for_session(key);
            let cmd = redis::cmd("HGETALL")
                .arg(self.keys.user_state(key.user_id()))
                .to_owned();
            self.run(key, cmd.query_async(&mut conn)).await
        };
        let app_state = async {
            let mut conn = self.conn.for_session(key);
            let cmd = redis::cmd("HGETALL").arg(self.keys.app()).to_owned();
            self.run(key, cmd.query_async(&mut conn)).await
        };
        let ((head, mut events), user, app) = futures::try_join!(read, user_state, app_state)?;
        let cached = head.clone().unwrap_or_else(|| StoredHead::absent(key));
        self.remember(key, Some(Box::new(cached)));
        events.drain(..events.len().saturating_sub(window));
        Ok(LoadedSession {
            record: head.map(|h| h.record),
            events,
            user_state: if key.is_anonymous() {
                StateMap::new()
            } else {
                decode_state(key, user)?
            },
            app_state: decode_state(key, app)?,
        })
    }

    /// Remembers (or, with `None`, forgets) the stored head of `key`.
    fn remember(&self, key: &SessionKey, head: Option<Box<StoredHead>>) {
        let mut heads = self.heads.lock();
        match (head, heads.get_mut(key)) {
            // The usual case, an append putting back the head it took: the entry stays.
            (Some(head), Some(slot)) => *slot = Some(head),
            (Some(head), None) => {
                heads.put(key.clone(), Some(head));
            }
            (None, _) => {
                heads.pop(key);
            }
        }
    }

    /// Takes the cached head of `key` out of the cache, leaving its entry empty: until it is
    /// put back, it is not known to be current.
    fn take_head(&self, key: &SessionKey) -> Option<Box<StoredHead>> {
        self.heads.lock().get_mut(key).and_then(Option::take)
    }

    /// Runs the delete script for `key`, then drops its index entries. With `score` (gc's),
    /// only if the session was not updated after it; `Ok(Kept(updated_ms))` otherwise.
    async fn delete_one(
        &self,
        key: &SessionKey,
        score: Option<&str>,
    ) -> Result<Deleted, StoreError> {
        self.remember(key, None);
        let names = self.session_keys(key);
        let mut conn = self.conn.for_session(key);
        let mut call = self.scripts.delete.prepare_invoke();
        call.key(&names.head)
            .key(&names.log)
            .arg(score.unwrap_or(""));
        let (outcome, updated): (i64, String) = self.run(key, call.invoke_async(&mut conn)).await?;
        if outcome == 2 {
            let updated = updated
                .parse()
                .map_err(|_| corrupt(key, format!("updated_ms {updated:?} is not a number")))?;
            return Ok(Deleted::Kept(updated));
        }
        let user_index = redis::cmd("ZREM")
            .arg(self.keys.index(key.user_id()))
            .arg(key.session_id())
            .to_owned();
        let gc_index = redis::cmd("ZREM")
            .arg(self.keys.gc())
            .arg(gc_member(key))
            .to_owned();
        let mut other = self.conn.for_session(key);
        let (_, _): (i64, i64) = self
            .run(key, async {
                futures::try_join!(
                    user_index.query_async::<i64>(&mut conn),
                    gc_index.query_async::<i64>(&mut other)
                )
            })
            .await?;
        Ok(if outcome == 1 {
            Deleted::Removed
        } else {
            Deleted::Absent
        })
    }
}

/// A session's head (`None` if it is not stored) and its log's newest events, as read.
type ReadSession = (Option<StoredHead>, Vec<Event>);

/// A session's entry in the head cache: boxed, so that an append takes it out and puts it back
/// without moving the record; empty while an append has it (or after one failed).
type HeadSlot = Option<Box<StoredHead>>;

/// Checks what `load.lua` (or `claim.lua`) read of `key` — the head's fields and the log's
/// newest events, at least `window` of them — and rebuilds the head from them.
fn read_back(
    key: &SessionKey,
    window: usize,
    fields: Vec<Option<String>>,
    raw: Vec<String>,
) -> Result<ReadSession, StoreError> {
    let events = decode_events(key, raw)?;
    let dense = events.windows(2).all(|w| w[1].seq == w[0].seq + 1);
    if !dense {
        return Err(corrupt(key, "the log's newest events are not in sequence"));
    }
    let head = decode_head(key, fields, &events)?;
    let next_seq = head.as_ref().map_or(1, |h| h.record.next_seq);
    let mismatch = match events.last() {
        Some(event) => event.seq + 1 != next_seq,
        None => window > 0 && next_seq != 1,
    };
    if mismatch {
        return Err(corrupt(
            key,
            "the log's newest events do not match the head",
        ));
    }
    Ok((head, events))
}

/// What [`RedisStore::delete_one`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deleted {
    /// The session existed and is gone.
    Removed,
    /// There was no such session (its index entries are gone now too).
    Absent,
    /// Kept: it was updated at this `updated_ms`, after the score gc saw.
    Kept(u64),
}

#[async_trait]
impl Store for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        self.loaded(key, window, self.read_session(key, window))
            .await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        self.append_turn(key, base_version, events, None).await
    }

    fn leases(&self) -> Option<Arc<dyn Leases>> {
        Some(Arc::new(self.clone()))
    }

    async fn append_fenced(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: &Lease,
    ) -> Result<u64, StoreError> {
        self.append_turn(key, base_version, events, Some(lease))
            .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.run(&"a readiness probe", self.conn.ping()).await
    }

    async fn confirm_replicated(&self, key: &SessionKey, version: u64) -> Result<(), StoreError> {
        let Some(replicated) = &self.replicated else {
            return Ok(());
        };
        let read = redis::cmd("HGET")
            .arg(self.session_keys(key).head)
            .arg("v")
            .to_owned();
        let marker = redis::cmd("SET")
            .arg(self.keys.session_marker(key))
            .arg(version)
            .arg("PX")
            .arg(1000)
            .to_owned();
        let slot = self.keys.session_slot(key);
        let (found, acked, degraded) = replicated.confirm(key, slot, read, marker).await?;
        // A primary that lost the version (a failover to a replica that missed it, a restart
        // that lost its newest writes) must not have replicas vouch for what it no longer has.
        let found = found.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if found != version {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: version,
                found,
            });
        }
        if acked < replicated.wanted && !degraded {
            return Err(StoreError::NotReplicated {
                key: key.clone(),
                version,
                acked,
                wanted: replicated.wanted,
                timeout: replicated.timeout,
            });
        }
        Ok(())
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
        let mut conn = self.conn.for_session(key);
        let cmd = redis::cmd("LRANGE")
            .arg(self.session_keys(key).log)
            .arg(start)
            .arg(stop)
            .to_owned();
        let raw: Vec<String> = self.run(key, cmd.query_async(&mut conn)).await?;
        decode_events(key, raw)
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        Ok(self.delete_one(key, None).await? == Deleted::Removed)
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
