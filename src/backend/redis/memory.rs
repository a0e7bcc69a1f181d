//! [`RedisMemory`]: memory entries in Redis, one small set of keys per user; searches pull the
//! user's entries into an in-process index, cached until the user's entries change.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lru::LruCache;
use parking_lot::Mutex;
use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script};
use sha2::{Digest, Sha256};

use crate::key::SessionKey;
use crate::memory::{
    check_search, prepare, MemoryEntry, MemoryError, MemoryHit, MemoryStore, UserIndex,
    MAX_ENTRIES_PER_USER,
};
use crate::state::Seq;

/// Longest a memory command may take, reconnect included: memory is background to a turn, so a
/// slow Redis must fail fast rather than hold the turn.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Users whose index is cached in process; as for the file store, enough for the active users
/// while bounding memory.
const CACHED_USERS: usize = 64;

/// Entries read per HSCAN step when deleting one session's entries.
const SCAN_COUNT: usize = 1_000;

/// Adds entries that are not there yet, raises the sessions' marks and bumps the user's
/// version when anything was added. ARGV holds groups of four: field, entry JSON, mark field,
/// seq. Returns `{added, entries now held}`.
const INGEST: &str = r"
local added = 0
for i = 1, #ARGV, 4 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then added = added + 1 end
  local mark = tonumber(redis.call('HGET', KEYS[2], ARGV[i + 2]) or '0')
  if tonumber(ARGV[i + 3]) > mark then redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i + 3]) end
end
if added > 0 then redis.call('INCR', KEYS[3]) end
return {added, redis.call('HLEN', KEYS[1])}
";

/// Keeps each user's entries in a hash `PREFIX:mem:{TAG}…:e` (field `SESSIONHASH:SEQ`, value the
/// entry as JSON), the sessions' marks in `…:w` and a change counter in `…:v`.
///
/// `TAG` is made from a SHA-256 of the user id, so a user's keys share one hash slot and no id
/// can open a tag or reach another user's keys; fields are hex and digits, so a pattern scan
/// never meets a glob character. A search reads the whole hash once per change of the user's
/// entries (at most [`MAX_ENTRIES_PER_USER`] entries) and ranks in process; later searches use
/// the cached index until the counter moves.
#[derive(Clone)]
pub struct RedisMemory {
    conn: ConnectionManager,
    prefix: Arc<str>,
    cache: Arc<Mutex<IndexCache>>,
    ingest: Arc<Script>,
}

impl std::fmt::Debug for RedisMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisMemory")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// Users' indexes with the change counter they were built at.
type IndexCache = LruCache<String, (u64, Arc<UserIndex>)>;

struct UserKeys {
    entries: String,
    marks: String,
    version: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash field of an entry: a digest of its session (hex) and its seq.
fn field(key: &SessionKey, seq: Seq) -> String {
    format!("{}:{seq}", session_hash(key))
}

fn session_hash(key: &SessionKey) -> String {
    hex(&Sha256::digest(key.to_string().as_bytes())[..12])
}

fn unavailable(error: impl std::fmt::Display) -> MemoryError {
    MemoryError::Unavailable {
        backend: "redis",
        detail: error.to_string(),
    }
}

impl RedisMemory {
    /// Connects to the Redis at `url` (`redis://…`), keeping keys under `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, MemoryError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let conn = tokio::time::timeout(TIMEOUT, client.get_connection_manager())
            .await
            .map_err(|_| unavailable(format!("no answer from {url} within {TIMEOUT:?}")))?
            .map_err(unavailable)?;
        let cached = NonZeroUsize::new(CACHED_USERS).expect("CACHED_USERS is positive");
        Ok(Self {
            conn,
            prefix: prefix.into(),
            cache: Arc::new(Mutex::new(LruCache::new(cached))),
            ingest: Arc::new(Script::new(INGEST)),
        })
    }

    fn keys(&self, user_id: &str) -> UserKeys {
        let digest = hex(&Sha256::digest(user_id.as_bytes()));
        let base = format!("{}:mem:{{{}}}{}", self.prefix, &digest[..16], &digest[16..]);
        UserKeys {
            entries: format!("{base}:e"),
            marks: format!("{base}:w"),
            version: format!("{base}:v"),
        }
    }

    /// One user's index, from the cache when the user's entries have not changed since.
    async fn index(&self, user_id: &str) -> Result<Arc<UserIndex>, MemoryError> {
        let keys = self.keys(user_id);
        let mut conn = self.conn.clone();
        let version: Option<u64> = timed(conn.get(&keys.version)).await?;
        let version = version.unwrap_or(0);
        if let Some((cached, index)) = self.cache.lock().get(user_id) {
            if *cached == version {
                return Ok(index.clone());
            }
        }
        let (version, raw): (Option<u64>, Vec<(String, String)>) = timed(
            redis::pipe()
                .atomic()
                .get(&keys.version)
                .hgetall(&keys.entries)
                .query_async(&mut conn),
        )
        .await?;
        let index = Arc::new(build(user_id, raw)?);
        let version = version.unwrap_or(0);
        self.cache
            .lock()
            .put(user_id.to_owned(), (version, index.clone()));
        Ok(index)
    }

    /// Forgets the oldest entries of a user past the bound.
    async fn enforce_bound(&self, user_id: &str) -> Result<(), MemoryError> {
        let mut index = (*self.index(user_id).await?).clone();
        let gone = index.forget_oldest();
        if gone.is_empty() {
            return Ok(());
        }
        let keys = self.keys(user_id);
        let fields: Vec<String> = gone.iter().map(|e| field(&e.key, e.seq)).collect();
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for chunk in fields.chunks(SCAN_COUNT) {
            pipe.hdel(&keys.entries, chunk).ignore();
        }
        pipe.incr(&keys.version, 1).ignore();
        timed::<()>(pipe.query_async(&mut conn)).await
    }
}

/// Awaits a Redis call within [`TIMEOUT`].
async fn timed<T>(
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, MemoryError> {
    tokio::time::timeout(TIMEOUT, call)
        .await
        .map_err(|_| unavailable(format!("no answer within {TIMEOUT:?}")))?
        .map_err(unavailable)
}

/// Indexes a user's stored entries, oldest first; one that cannot be read, or is another
/// user's, makes the user's memory corrupt.
fn build(user_id: &str, raw: Vec<(String, String)>) -> Result<UserIndex, MemoryError> {
    let mut entries = Vec::with_capacity(raw.len());
    for (name, json) in raw {
        let corrupt = |detail: String| MemoryError::Corrupt {
            user: user_id.to_owned(),
            detail: format!("entry {name}: {detail}"),
        };
        let entry: MemoryEntry = serde_json::from_str(&json).map_err(|e| corrupt(e.to_string()))?;
        if entry.key.user_id() != user_id || field(&entry.key, entry.seq) != name {
            return Err(corrupt(
                "it is not this user's entry under its own name".into(),
            ));
        }
        entries.push(entry);
    }
    entries.sort_by(|a, b| (a.at_ms, &a.key, a.seq).cmp(&(b.at_ms, &b.key, b.seq)));
    let mut index = UserIndex::new();
    for entry in entries {
        index.insert(entry);
    }
    Ok(index)
}

#[async_trait]
impl MemoryStore for RedisMemory {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn ingest(&self, entries: &[MemoryEntry]) -> Result<usize, MemoryError> {
        let entries = prepare(entries)?;
        let mut added = 0;
        let mut users: Vec<&str> = entries.iter().map(|e| e.key.user_id()).collect();
        users.sort_unstable();
        users.dedup();
        for user in users {
            let keys = self.keys(user);
            let mut invocation = self.ingest.prepare_invoke();
            invocation
                .key(&keys.entries)
                .key(&keys.marks)
                .key(&keys.version);
            for entry in entries.iter().filter(|e| e.key.user_id() == user) {
                let json = serde_json::to_string(entry).map_err(unavailable)?;
                invocation
                    .arg(field(&entry.key, entry.seq))
                    .arg(json)
                    .arg(entry.key.to_string())
                    .arg(entry.seq);
            }
            let mut conn = self.conn.clone();
            let (new, held): (usize, usize) = timed(invocation.invoke_async(&mut conn)).await?;
            added += new;
            if held > MAX_ENTRIES_PER_USER {
                self.enforce_bound(user).await?;
            }
        }
        Ok(added)
    }

    async fn ingested_through(&self, key: &SessionKey) -> Result<Seq, MemoryError> {
        let keys = self.keys(key.user_id());
        let mut conn = self.conn.clone();
        let mark: Option<Seq> = timed(conn.hget(&keys.marks, key.to_string())).await?;
        Ok(mark.unwrap_or(0))
    }

    async fn search(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let terms = check_search(query, k)?;
        Ok(self.index(user_id).await?.search(&terms, k))
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<u64, MemoryError> {
        let keys = self.keys(key.user_id());
        let mut conn = self.conn.clone();
        let pattern = format!("{}:*", session_hash(key));
        let mut cursor = 0u64;
        let mut fields = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = timed(
                redis::cmd("HSCAN")
                    .arg(&keys.entries)
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .query_async(&mut conn),
            )
            .await?;
            // HSCAN answers field, value, field, value…: keep the fields.
            fields.extend(batch.into_iter().step_by(2));
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for chunk in fields.chunks(SCAN_COUNT) {
            pipe.hdel(&keys.entries, chunk).ignore();
        }
        pipe.hdel(&keys.marks, key.to_string()).ignore();
        pipe.incr(&keys.version, 1).ignore();
        timed::<()>(pipe.query_async(&mut conn)).await?;
        Ok(fields.len() as u64)
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, MemoryError> {
        let keys = self.keys(user_id);
        let mut conn = self.conn.clone();
        let (held,): (u64,) = timed(
            redis::pipe()
                .atomic()
                .hlen(&keys.entries)
                .del(&[&keys.entries, &keys.marks])
                .ignore()
                .incr(&keys.version, 1)
                .ignore()
                .query_async(&mut conn),
        )
        .await?;
        self.cache.lock().pop(user_id);
        Ok(held)
    }
}
