//! The Redis kit, for a family of your own kept in Redis beside turnstile's (under the same
//! prefix, in the same Redis or Cluster): the steps turnstile's Redis families are built from.
//!
//! - Connecting: [`connect`] opens a [`RedisConnection`] to `redis://…`, `rediss://…` or a
//!   Cluster (`redis+cluster://HOST:PORT[,HOST:PORT…]`, [`is_cluster_url`]), within the
//!   [`RedisOptions`] timeouts; [`RedisStore::connection`](super::RedisStore::connection)
//!   shares the session store's instead.
//! - Keys: [`check_prefix`] is the one check of a prefix every family makes (it can never open a
//!   hash tag or a pattern); [`key_part`] encodes an id for a key (lowercase hex: no id can
//!   inject `:`, `{`, `}` or `*`). On a Cluster, put one hash tag in every key a command or
//!   script touches (`<prefix>:{<key_part(user)>}:…`, say).
//! - Errors: [`redis_error`] maps the client's errors as the families do (the server or the
//!   network: `Unavailable`; a reply of the wrong shape: `Corrupt`).
//! - [`redis`]: the `redis` crate the kit speaks, so that your commands and the connection agree
//!   on its version.
//!
//! See `docs/stores.md`, "Adding a backend", and
//! `tests/a_family_outside_the_crate_is_built_on_the_backend_kits.rs` for a family built on
//! this kit.

pub use redis;

pub use super::conn::RedisConnection;
pub use super::errors::{check_prefix, redis_error, MAX_PREFIX_BYTES};
use super::RedisOptions;
use crate::store::StoreError;

/// Connects to `url` (a server or a Cluster), within `options`' connect timeout (its response
/// timeout then bounds every answer). A bad URL is `InvalidRequest`; a Redis that does not
/// answer in time is `Unavailable`.
pub async fn connect(url: &str, options: &RedisOptions) -> Result<RedisConnection, StoreError> {
    let deadline = options.connect_timeout + options.response_timeout;
    super::conn::connect(url, options, deadline)
        .await
        .map(RedisConnection::from)
}

/// Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`).
pub fn is_cluster_url(url: &str) -> bool {
    super::conn::cluster_nodes(url).is_some()
}

/// `id` as it goes into a key: lowercase hex of its bytes, so that no id can carry key syntax,
/// and two ids never share a key.
pub fn key_part(id: &str) -> String {
    crate::hex::encode(id)
}
