//! The PostgreSQL kit, for a family of your own kept in the session store's database (in its
//! schema, beside its tables): the steps turnstile's PostgreSQL families are built from.
//!
//! - Statements: [`PostgresStore::query`](super::PostgresStore::query) and
//!   [`PostgresStore::read`](super::PostgresStore::read) run one statement on the store's pool,
//!   within its deadline, with its TLS; [`PostgresStore::schema`](super::PostgresStore::schema)
//!   names the schema (a plain identifier) to put your tables in. Create them with
//!   `CREATE TABLE IF NOT EXISTS <schema>.<table> …` at start-up, as turnstile's migrations do;
//!   pass ids as parameters only.
//! - Errors: [`pg_error`] maps the driver's errors as the families do.
//! - [`tokio_postgres`]: the driver the kit speaks, so that your parameter and row types agree
//!   with it on its version.
//!
//! See `docs/stores.md`, "Adding a backend", and
//! `tests/a_family_outside_the_crate_is_built_on_the_backend_kits.rs` for a family built on
//! this kit.

pub use tokio_postgres;

pub use super::errors::pg_error;
