//! Backends: one folder per storage technology, each holding that technology's kit and every
//! family kept on it.
//!
//! A family is one kind of data with its own trait, defined (with its in-memory reference
//! implementation and its conformance suite) in its own module: sessions and leases
//! ([`crate::store`]), channel pairings ([`crate::pairing`]), artifacts ([`crate::artifact`])
//! and memory across sessions ([`crate::memory`]). A backend's kit is what its families share —
//! for Redis the connection and the key prefix, for PostgreSQL the pool, the schema and TLS, for
//! files the layout and atomic writes — so that no family reaches into another's insides.
//!
//! | backend | sessions | pairings | artifacts | memory |
//! |---|---|---|---|---|
//! | memory | [`InMemoryStore`](crate::InMemoryStore) | [`MemoryPairingStore`](crate::pairing::MemoryPairingStore) | [`MemoryArtifactStore`](crate::artifact::MemoryArtifactStore) | [`InMemory`](crate::memory::InMemory) |
//! | [`file`] | [`FileStore`] | [`FilePairingStore`] | [`FileArtifactStore`] | [`FileMemory`] |
//! | `redis` | `RedisStore` | `RedisPairingStore` | `RedisArtifactStore` | `RedisMemory` |
//! | `postgres` | `PostgresStore` | `PostgresPairingStore` | — | — |
//!
//! [`open_backend`] opens every family a [`StoreUrl`] names and refuses, saying why, a family
//! that backend does not keep; [`open_store`] opens the sessions alone. `docs/stores.md`,
//! "Adding a backend", says what a new one takes.

mod artifact_place;
pub mod file;
mod open;
mod open_backend;
mod open_inbox;
mod open_memory;
mod open_pairings;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
mod url;

pub use artifact_place::ArtifactPlace;
pub use file::{
    FileArtifactStore, FileInbox, FileMemory, FilePairingStore, FileStore, ARTIFACTS_FOLDER,
    INBOX_FOLDER, MAX_LOADED_USERS, MEMORY_FOLDER, PAIRINGS_FILE,
};
pub use open::{open_store, OpenStoreError, OpenedStore};
pub use open_backend::{open_backend, Backend, BackendError, Family};
pub use open_inbox::open_inbox;
pub use open_memory::{open_memory, REDIS_MEMORY_PREFIX};
pub use open_pairings::open_pairings;
#[cfg(feature = "postgres")]
pub use postgres::{
    PostgresOptions, PostgresPairingStore, PostgresStore, SslMode,
    LAYOUT_VERSION as POSTGRES_LAYOUT_VERSION,
};
#[cfg(feature = "redis")]
pub use redis::{
    RedisArtifactStore, RedisMemory, RedisOptions, RedisPairingStore, RedisStore, ReplicaPolicy,
};
pub use url::{StoreUrl, StoreUrlError, TEMP_FOLDER_URL};
