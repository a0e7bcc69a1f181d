//! Artifacts in Redis or Redis Cluster, size-limited (Redis holds every value in memory).
//!
//! Keys, under the session store's prefix; `{T}R` is the SHA-256 of the scope's canonical
//! encoding in hex with its first 16 digits as the hash tag, so that every key of one scope
//! lives in one slot and no id or name ever chooses a slot or appears in a key unencoded:
//! - `<prefix>:a:{T}R:names` — hash: hex(name) → newest version.
//! - `<prefix>:a:{T}R:n:<hex(name)>` — hash: `m<v>` → the version's metadata (JSON), `d<v>` →
//!   its bytes.
//! - `<prefix>:a:{U}R:sessions` — set, per named user: hex(session id) of each of the user's
//!   sessions that has artifacts, so that `delete_user` finds them (a user is tagged apart
//!   from its sessions, so this is a separate command).
//!
//! A save is one Lua script over the scope's `names` hash and the name's hash: the version
//! counter and the bytes are written together, so two saves never share a version.

use std::time::Duration;

use async_trait::async_trait;
use redis::{RedisError, Script};
use sha2::{Digest, Sha256};

use super::conn::{connect, Connection};
use super::RedisOptions;
use crate::artifact::{
    check_save, check_scope, now_ms, validate_name, Artifact, ArtifactError, ArtifactMeta,
    ArtifactScope, ArtifactStore, DEFAULT_MAX_BYTES, MAX_VERSIONS,
};
use crate::hex;
use crate::key::{validate_id, KeyPart, SessionKey};
use crate::store::StoreError;

/// Bound on connecting, as for the session store: a caller learns quickly that Redis is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on one command's answer; a 16 MiB value takes well under a second on a local network.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Versions whose metadata one round trip of `versions` reads: a few hundred small replies keep
/// each pipeline short while a name with many versions costs few round trips.
const VERSIONS_PER_ROUND_TRIP: u64 = 256;

/// KEYS[1] names, KEYS[2] the name's hash. ARGV[1] hex name, ARGV[2] meta JSON (its version
/// and size are taken from the field names on reads), ARGV[3] bytes, ARGV[4] most versions.
/// Returns the version, or -1 when the name has the most versions it may have.
const SAVE_LUA: &str = r"
local v = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') + 1
if v > tonumber(ARGV[4]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], v)
redis.call('HSET', KEYS[2], 'm' .. v, ARGV[2], 'd' .. v, ARGV[3])
return v
";

/// Keeps artifacts in Redis, shared by every process using the same prefix. Cloning is cheap
/// and shares the connection.
#[derive(Clone)]
pub struct RedisArtifactStore {
    /// Multiplexed and self-healing, as the session store's (a server or a Cluster).
    conn: Connection,
    /// `<prefix>:a:`.
    base: String,
    /// See [`ArtifactStore::max_bytes`].
    max_bytes: u64,
    save: Script,
}

impl std::fmt::Debug for RedisArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisArtifactStore")
            .field("base", &self.base)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl RedisArtifactStore {
    /// Connects to `url` (a server or `redis+cluster://…`) and keeps artifacts under the
    /// options' prefix, with the default size limit ([`DEFAULT_MAX_BYTES`]).
    pub async fn connect(url: &str, options: &RedisOptions) -> Result<Self, ArtifactError> {
        Self::connect_with_limit(url, options, DEFAULT_MAX_BYTES).await
    }

    /// Like [`RedisArtifactStore::connect`], with a size limit of `max_bytes` per version.
    pub async fn connect_with_limit(
        url: &str,
        options: &RedisOptions,
        max_bytes: u64,
    ) -> Result<Self, ArtifactError> {
        let prefix = options.prefix();
        super::errors::check_prefix(prefix).map_err(unavailable)?;
        let options = options
            .clone()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_response_timeout(RESPONSE_TIMEOUT);
        let deadline = CONNECT_TIMEOUT * 2 + RESPONSE_TIMEOUT;
        let conn = connect(url, &options, deadline)
            .await
            .map_err(|e: StoreError| unavailable(e.to_string()))?;
        Ok(Self {
            conn,
            base: format!("{prefix}:a:"),
            max_bytes,
            save: Script::new(SAVE_LUA),
        })
    }

    /// `<base>{tag}rest` of a scope.
    fn scope_base(&self, scope: &ArtifactScope) -> String {
        let mut canonical = Vec::new();
        match scope {
            ArtifactScope::Session(key) => {
                canonical.push(b's');
                for id in [key.user_id(), key.session_id()] {
                    canonical.extend_from_slice(&(id.len() as u64).to_be_bytes());
                    canonical.extend_from_slice(id.as_bytes());
                }
            }
            ArtifactScope::User(user) => {
                canonical.push(b'a');
                canonical.extend_from_slice(user.as_bytes());
            }
        }
        format!("{}{}", self.base, tagged(&canonical))
    }

    fn names_key(&self, scope: &ArtifactScope) -> String {
        format!("{}:names", self.scope_base(scope))
    }

    fn name_key(&self, scope: &ArtifactScope, name: &str) -> String {
        format!("{}:n:{}", self.scope_base(scope), hex::encode(name))
    }

    /// The set of a named user's sessions that have artifacts.
    fn sessions_key(&self, user_id: &str) -> String {
        let mut canonical = vec![b'i'];
        canonical.extend_from_slice(user_id.as_bytes());
        format!("{}{}:sessions", self.base, tagged(&canonical))
    }

    /// Runs one exchange within the overall deadline.
    async fn run<T>(
        &self,
        exchange: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, ArtifactError> {
        let deadline = CONNECT_TIMEOUT + RESPONSE_TIMEOUT;
        match tokio::time::timeout(deadline, exchange).await {
            Ok(result) => result.map_err(redis_error),
            Err(_) => Err(unavailable(format!("no answer within {deadline:?}"))),
        }
    }

    /// The newest version of a name, 0 when none.
    async fn newest(&self, scope: &ArtifactScope, name: &str) -> Result<u64, ArtifactError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("HGET")
            .arg(self.names_key(scope))
            .arg(hex::encode(name))
            .to_owned();
        let found: Option<u64> = self.run(cmd.query_async(&mut conn)).await?;
        Ok(found.unwrap_or(0))
    }

    /// Deletes a scope's keys; returns how many versions they held.
    async fn delete_scope(&self, scope: &ArtifactScope) -> Result<u64, ArtifactError> {
        let mut conn = self.conn.clone();
        let names_key = self.names_key(scope);
        let cmd = redis::cmd("HGETALL").arg(&names_key).to_owned();
        let names: Vec<(String, u64)> = self.run(cmd.query_async(&mut conn)).await?;
        if names.is_empty() {
            return Ok(0);
        }
        let mut del = redis::cmd("DEL");
        del.arg(&names_key);
        let base = self.scope_base(scope);
        for (hex_name, _) in &names {
            del.arg(format!("{base}:n:{hex_name}"));
        }
        let _: u64 = self.run(del.query_async(&mut conn)).await?;
        Ok(names.iter().map(|(_, newest)| newest).sum())
    }
}

/// `{first 16 hex digits}rest` of the SHA-256 of `bytes`, as the session store tags its keys.
fn tagged(bytes: &[u8]) -> String {
    let digest = hex_digest(bytes);
    format!("{{{}}}{}", &digest[..16], &digest[16..])
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn unavailable(detail: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Unavailable {
        backend: "redis",
        detail: detail.to_string(),
    }
}

/// A reply of the wrong shape means a key holds data this store did not write: `Corrupt`.
fn redis_error(e: RedisError) -> ArtifactError {
    let wrong_data = matches!(
        e.kind(),
        redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse
    ) || e.code() == Some("WRONGTYPE");
    if wrong_data {
        ArtifactError::Corrupt {
            detail: format!("redis: {e}"),
        }
    } else {
        unavailable(e)
    }
}

/// A reply of the wrong shape: a key holds data this store did not write.
fn shape(e: impl std::fmt::Display) -> ArtifactError {
    ArtifactError::Corrupt {
        detail: format!("redis: {e}"),
    }
}

fn decode_meta(raw: &[u8], version: u64, bytes: u64) -> Result<ArtifactMeta, ArtifactError> {
    let mut meta: ArtifactMeta =
        serde_json::from_slice(raw).map_err(|e| ArtifactError::Corrupt {
            detail: format!("redis: artifact metadata: {e}"),
        })?;
    meta.version = version;
    meta.bytes = bytes;
    Ok(meta)
}

#[async_trait]
impl ArtifactStore for RedisArtifactStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn save(
        &self,
        scope: &ArtifactScope,
        name: &str,
        bytes: &[u8],
        mime: &str,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        check_save(name, bytes, mime, self.max_bytes)?;
        let mut conn = self.conn.clone();
        if let ArtifactScope::Session(key) = scope {
            register_session(self, key).await?;
        }
        // `version` and `bytes` are placeholders: reads take them from the field names and sizes.
        let meta = serde_json::json!({
            "name": name, "version": 0, "bytes": 0, "mime": mime, "saved_ms": now_ms(),
        });
        let mut invocation = self.save.prepare_invoke();
        invocation
            .key(self.names_key(scope))
            .key(self.name_key(scope, name))
            .arg(hex::encode(name))
            .arg(meta.to_string())
            .arg(bytes)
            .arg(MAX_VERSIONS);
        let version: i64 = self.run(invocation.invoke_async(&mut conn)).await?;
        u64::try_from(version).map_err(|_| ArtifactError::TooManyVersions {
            scope: scope.to_string(),
            name: name.to_owned(),
        })
    }

    async fn load(
        &self,
        scope: &ArtifactScope,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Artifact>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let version = match version {
            Some(v) => v,
            None => self.newest(scope, name).await?,
        };
        if version == 0 {
            return Ok(None);
        }
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("HMGET")
            .arg(self.name_key(scope, name))
            .arg(format!("m{version}"))
            .arg(format!("d{version}"))
            .to_owned();
        let (meta, data): (Option<Vec<u8>>, Option<Vec<u8>>) =
            self.run(cmd.query_async(&mut conn)).await?;
        match (meta, data) {
            (Some(meta), Some(data)) => Ok(Some(Artifact {
                meta: decode_meta(&meta, version, data.len() as u64)?,
                data,
            })),
            _ => Ok(None),
        }
    }

    async fn list(&self, scope: &ArtifactScope) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("HGETALL").arg(self.names_key(scope)).to_owned();
        let names: Vec<(String, u64)> = self.run(cmd.query_async(&mut conn)).await?;
        let mut metas = Vec::with_capacity(names.len());
        for (hex_name, newest) in names {
            let name = hex::decode(&hex_name).ok_or_else(|| ArtifactError::Corrupt {
                detail: format!("redis: artifact name field {hex_name:?} is not hex"),
            })?;
            let pipe = redis::pipe()
                .cmd("HGET")
                .arg(self.name_key(scope, &name))
                .arg(format!("m{newest}"))
                .cmd("HSTRLEN")
                .arg(self.name_key(scope, &name))
                .arg(format!("d{newest}"))
                .to_owned();
            let (meta, len): (Option<Vec<u8>>, u64) = self.run(pipe.query_async(&mut conn)).await?;
            if let Some(meta) = meta {
                metas.push(decode_meta(&meta, newest, len)?);
            }
        }
        metas.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(metas)
    }

    async fn versions(
        &self,
        scope: &ArtifactScope,
        name: &str,
    ) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let newest = self.newest(scope, name).await?;
        let key = self.name_key(scope, name);
        let mut metas = Vec::new();
        let mut conn = self.conn.clone();
        let mut first = 1;
        while first <= newest {
            let last = newest.min(first + VERSIONS_PER_ROUND_TRIP - 1);
            let mut pipe = redis::pipe();
            for v in first..=last {
                pipe.cmd("HGET").arg(&key).arg(format!("m{v}"));
                pipe.cmd("HSTRLEN").arg(&key).arg(format!("d{v}"));
            }
            let replies: Vec<redis::Value> = self.run(pipe.query_async(&mut conn)).await?;
            for (v, pair) in (first..=last).zip(replies.chunks(2)) {
                let [meta, len] = pair else { continue };
                let meta: Option<Vec<u8>> = redis::from_redis_value_ref(meta).map_err(shape)?;
                let len: u64 = redis::from_redis_value_ref(len).map_err(shape)?;
                if let Some(meta) = meta {
                    metas.push(decode_meta(&meta, v, len)?);
                }
            }
            first = last + 1;
        }
        Ok(metas)
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: Option<&str>,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        let Some(name) = name else {
            return self.delete_scope(scope).await;
        };
        validate_name(name)?;
        let newest = self.newest(scope, name).await?;
        let mut conn = self.conn.clone();
        let pipe = redis::pipe()
            .atomic()
            .cmd("HDEL")
            .arg(self.names_key(scope))
            .arg(hex::encode(name))
            .ignore()
            .cmd("DEL")
            .arg(self.name_key(scope, name))
            .ignore()
            .to_owned();
        let () = self.run(pipe.query_async(&mut conn)).await?;
        Ok(newest)
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, ArtifactError> {
        validate_id(user_id, KeyPart::User)?;
        let mut conn = self.conn.clone();
        let index = self.sessions_key(user_id);
        let cmd = redis::cmd("SMEMBERS").arg(&index).to_owned();
        let sessions: Vec<String> = self.run(cmd.query_async(&mut conn)).await?;
        let mut removed = 0;
        for hex_session in sessions {
            let Some(session) = hex::decode(&hex_session) else {
                continue;
            };
            if let Ok(key) = SessionKey::new(user_id, session) {
                removed += self.delete_scope(&ArtifactScope::Session(key)).await?;
            }
        }
        removed += self
            .delete_scope(&ArtifactScope::User(user_id.to_owned()))
            .await?;
        let cmd = redis::cmd("DEL").arg(&index).to_owned();
        let _: u64 = self.run(cmd.query_async(&mut conn)).await?;
        Ok(removed)
    }
}

/// Records a named user's session in the user's index before its first save, so that
/// `delete_user` never misses it.
async fn register_session(
    store: &RedisArtifactStore,
    key: &SessionKey,
) -> Result<(), ArtifactError> {
    if key.is_anonymous() {
        return Ok(());
    }
    let mut conn = store.conn.clone();
    let cmd = redis::cmd("SADD")
        .arg(store.sessions_key(key.user_id()))
        .arg(hex::encode(key.session_id()))
        .to_owned();
    let _: u64 = store.run(cmd.query_async(&mut conn)).await?;
    Ok(())
}
