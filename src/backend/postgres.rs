//! PostgreSQL (feature `postgres`).
//!
//! The kit — what every family kept in PostgreSQL shares, public in [`kit`] for families written
//! outside the crate — is [`PostgresOptions`] (pool, schema,
//! timeouts), `tls` ([`SslMode`] as libpq spells it) and `schema` (the tables and their
//! migrations, [`LAYOUT_VERSION`]) and `errors` (the driver's and the pool's errors as the
//! families' errors); the pool and its bounded statements live in the session
//! store, whose handle the other families share. On it: the session store ([`PostgresStore`])
//! and pairings ([`PostgresPairingStore`]). Artifacts and memory are not kept in PostgreSQL:
//! [`open_backend`](super::open_backend) says so rather than putting them elsewhere.

mod errors;
pub mod kit;
mod options;
mod pairings;
mod schema;
mod sessions;
mod tls;

pub use options::PostgresOptions;
pub use pairings::PostgresPairingStore;
pub use schema::LAYOUT_VERSION;
pub use sessions::PostgresStore;
pub use tls::SslMode;
