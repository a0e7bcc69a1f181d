//! Pairings in Redis: one hash of accounts to users, plus a set per user of their accounts.
//!
//! Keys, under the same prefix as the session store's:
//! - `<prefix>:pairings` — hash: field `hex(channel):hex(channel_user)`, value the user id.
//! - `<prefix>:pairings:user:<hex(user)>` — set of that user's fields.
//!
//! Ids are hex-encoded, so none can inject key syntax. Each change is one Lua script, so the two
//! indexes always agree. The scripts build the per-user key from the stored user id; on a Redis
//! Cluster every pairing key carries one hash tag (`<prefix>:{pairings}`, `<prefix>:{pairings}:
//! user:<hex(user)>`), so that they all live in one slot and the scripts never cross slots.
//! Pairings are few and small next to sessions: one slot holds them well.

use std::time::Duration;

use async_trait::async_trait;
use redis::{RedisError, Script};

use super::conn::{cluster_nodes, connect, Connection};
use super::RedisOptions;
use crate::hex;
use crate::pairing::{Pairing, PairingError, PairingStore};
use crate::store::StoreError;

/// Bound on connecting, as for the session store: a caller learns quickly that Redis is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on one command's answer.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Hex-encodes a string inside a script, exactly as [`hex::encode`] does.
const HEX_LUA: &str = r"
local function hex(s)
  return (s:gsub('.', function(c) return string.format('%02x', string.byte(c)) end))
end
";

/// KEYS[1] hash. ARGV[1] field, ARGV[2] user, ARGV[3] per-user key prefix. Returns the old user.
const PUT_LUA: &str = r"
local old = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if old and old ~= ARGV[2] then redis.call('SREM', ARGV[3] .. hex(old), ARGV[1]) end
redis.call('SADD', ARGV[3] .. hex(ARGV[2]), ARGV[1])
return old
";

/// KEYS[1] hash. ARGV[1] field, ARGV[2] per-user key prefix. Returns the removed user.
const REMOVE_LUA: &str = r"
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('SREM', ARGV[2] .. hex(old), ARGV[1])
end
return old
";

/// KEYS[1] hash, KEYS[2] the user's set. ARGV[1] user. Returns how many pairings were removed.
const REMOVE_USER_LUA: &str = r"
local n = 0
for _, field in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('HGET', KEYS[1], field) == ARGV[1] then
    redis.call('HDEL', KEYS[1], field)
    n = n + 1
  end
end
redis.call('DEL', KEYS[2])
return n
";

/// Pairings in Redis: the pairing store that goes with the Redis session store, shared by every
/// process using the same prefix. A Redis that is down answers
/// [`PairingError::Unavailable`] within a few seconds. Cloning is cheap and shares the
/// connection.
#[derive(Clone)]
pub struct RedisPairingStore {
    /// Multiplexed and self-healing, as the session store's (a server or a Cluster).
    conn: Connection,
    /// `<prefix>:pairings`.
    hash: String,
    /// `<prefix>:pairings:user:`, followed by the hex of a user id.
    user_prefix: String,
    put: Script,
    remove: Script,
    remove_user: Script,
}

impl std::fmt::Debug for RedisPairingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPairingStore")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl RedisPairingStore {
    /// Connects to `url` and keeps pairings under `prefix` (the session store's default is
    /// `turnstile`): ASCII letters, digits, `_ - . :`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, PairingError> {
        super::errors::check_prefix(prefix).map_err(PairingError::InvalidRequest)?;
        let options = RedisOptions::default()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_response_timeout(RESPONSE_TIMEOUT);
        let deadline = CONNECT_TIMEOUT * 2 + RESPONSE_TIMEOUT;
        let conn = connect(url, &options, deadline)
            .await
            .map_err(|e| match e {
                StoreError::InvalidRequest(detail) => PairingError::InvalidRequest(detail),
                other => unavailable(other.to_string()),
            })?;
        // On a Cluster every key shares one hash tag (see the module docs); a server keeps the
        // names it always had, so existing pairings stay where they are.
        let base = match cluster_nodes(url) {
            Some(_) => format!("{prefix}:{{pairings}}"),
            None => format!("{prefix}:pairings"),
        };
        let script = |body: &str| Script::new(&format!("{HEX_LUA}{body}"));
        Ok(Self {
            conn,
            user_prefix: format!("{base}:user:"),
            hash: base,
            put: script(PUT_LUA),
            remove: script(REMOVE_LUA),
            remove_user: script(REMOVE_USER_LUA),
        })
    }

    /// Runs one exchange within the overall deadline.
    async fn run<T>(
        &self,
        exchange: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, PairingError> {
        let deadline = CONNECT_TIMEOUT + RESPONSE_TIMEOUT;
        match tokio::time::timeout(deadline, exchange).await {
            Ok(result) => result.map_err(|e| redis_error(&self.hash, e)),
            Err(_) => Err(unavailable(format!("no answer within {deadline:?}"))),
        }
    }
}

/// The hash field of an account.
fn field(channel: &str, channel_user: &str) -> String {
    format!("{}:{}", hex::encode(channel), hex::encode(channel_user))
}

fn parse_field(field: &str) -> Option<(String, String)> {
    let (channel, channel_user) = field.split_once(':')?;
    Some((hex::decode(channel)?, hex::decode(channel_user)?))
}

fn unavailable(detail: impl std::fmt::Display) -> PairingError {
    PairingError::Unavailable {
        backend: "redis",
        detail: detail.to_string(),
    }
}

/// A reply of the wrong shape means a key holds data this store did not write: `Corrupt`.
fn redis_error(place: &str, e: RedisError) -> PairingError {
    let wrong_data = matches!(
        e.kind(),
        redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse
    ) || e.code() == Some("WRONGTYPE");
    if wrong_data {
        PairingError::Corrupt {
            place: place.to_owned(),
            detail: format!("redis: {e}"),
        }
    } else {
        unavailable(e)
    }
}

#[async_trait]
impl PairingStore for RedisPairingStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn get(&self, channel: &str, channel_user: &str) -> Result<Option<String>, PairingError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("HGET")
            .arg(&self.hash)
            .arg(field(channel, channel_user))
            .to_owned();
        self.run(cmd.query_async(&mut conn)).await
    }

    async fn put(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, PairingError> {
        let mut conn = self.conn.clone();
        let mut call = self.put.prepare_invoke();
        call.key(&self.hash)
            .arg(field(channel, channel_user))
            .arg(user)
            .arg(&self.user_prefix);
        self.run(call.invoke_async(&mut conn)).await
    }

    async fn remove(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, PairingError> {
        let mut conn = self.conn.clone();
        let mut call = self.remove.prepare_invoke();
        call.key(&self.hash)
            .arg(field(channel, channel_user))
            .arg(&self.user_prefix);
        self.run(call.invoke_async(&mut conn)).await
    }

    async fn of_user(&self, user: &str) -> Result<Vec<Pairing>, PairingError> {
        let mut conn = self.conn.clone();
        let members = redis::cmd("SMEMBERS")
            .arg(format!("{}{}", self.user_prefix, hex::encode(user)))
            .to_owned();
        let fields: Vec<String> = self.run(members.query_async(&mut conn)).await?;
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let values = redis::cmd("HMGET").arg(&self.hash).arg(&fields).to_owned();
        let users: Vec<Option<String>> = self.run(values.query_async(&mut conn)).await?;
        let mut out: Vec<Pairing> = fields
            .iter()
            .zip(users)
            // The set is an index; the hash is the truth.
            .filter(|(_, owner)| owner.as_deref() == Some(user))
            .filter_map(|(field, _)| parse_field(field))
            .map(|(channel, channel_user)| Pairing {
                channel,
                channel_user,
                user: user.to_owned(),
            })
            .collect();
        out.sort();
        Ok(out)
    }

    async fn remove_user(&self, user: &str) -> Result<u64, PairingError> {
        let mut conn = self.conn.clone();
        let mut call = self.remove_user.prepare_invoke();
        call.key(&self.hash)
            .key(format!("{}{}", self.user_prefix, hex::encode(user)))
            .arg(user);
        self.run(call.invoke_async(&mut conn)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_hostile_ids_stay_inside_them() {
        for (channel, user) in [("slack", "U1"), ("a:b", "}{*?"), ("é", ":")] {
            let f = field(channel, user);
            assert_eq!(f.matches(':').count(), 1, "{f}");
            assert!(f.bytes().all(|b| b.is_ascii_hexdigit() || b == b':'));
            assert_eq!(parse_field(&f), Some((channel.to_owned(), user.to_owned())));
        }
        assert_eq!(parse_field("zz:00"), None);
    }
}
