//! Redis and Redis Cluster (feature `redis`).
//!
//! The kit — what every family kept in Redis shares, public in [`kit`] for families written
//! outside the crate — is `conn` (connecting to a standalone
//! Redis or a Cluster, bounded waits, finding a Cluster's nodes), [`RedisOptions`] (the
//! prefix every key lives under and the timeouts) and `errors` (Redis errors as the families'
//! errors, and the one check of a prefix). On it: the session store
//! ([`RedisStore`]), pairings ([`RedisPairingStore`]), artifacts ([`RedisArtifactStore`]) and
//! memory across sessions ([`RedisMemory`]), all under one prefix so that one Redis holds a
//! deployment's families side by side.

mod artifacts;
pub(crate) mod conn;
mod errors;
pub mod kit;
mod memory;
mod options;
mod pairings;
pub(crate) mod sessions;

pub use artifacts::RedisArtifactStore;
pub use memory::RedisMemory;
pub use options::{RedisOptions, ReplicaPolicy};
pub use pairings::RedisPairingStore;
pub use sessions::RedisStore;
