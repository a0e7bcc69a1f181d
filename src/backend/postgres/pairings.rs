//! Pairings in PostgreSQL: the table `S.pairings` in the session store's schema `S`, created by
//! the store's migrations (migration 3), shared by every process that uses the schema.
//!
//! One row per channel account, `(channel, channel_user)` its primary key, so an account has one
//! user by construction; the index `pairings_by_user (user_id, channel, channel_user)` finds and
//! deletes a user's accounts in order. Ids travel as bound parameters only. Each call is one
//! statement on the store's pool, so one transaction: a failed call changes nothing.

use std::sync::Arc;

use async_trait::async_trait;

use super::{PostgresOptions, PostgresStore};
use crate::pairing::{Pairing, PairingError, PairingStore};
use crate::store::StoreError;

/// How many times [`PairingStore::put`] runs its statement when concurrent writers of the same
/// new account keep racing it (each race needs another writer's commit in between).
const PUT_ATTEMPTS: usize = 5;

/// The statements, with the schema filled in.
#[derive(Debug)]
struct Sql {
    /// `$1` channel, `$2` channel user → user.
    get: String,
    /// `$1` channel, `$2` channel user, `$3` user → the earlier user (or null), and whether the
    /// pairing was written (false only when a concurrent writer created the account meanwhile:
    /// run it again).
    put: String,
    /// `$1` channel, `$2` channel user → the removed user.
    remove: String,
    /// `$1` user → channel, channel user, in order.
    of_user: String,
    /// `$1` user → how many pairings were removed.
    remove_user: String,
}

impl Sql {
    fn new(s: &str) -> Self {
        Self {
            get: format!(
                "SELECT user_id FROM {s}.pairings WHERE channel = $1 AND channel_user = $2"
            ),
            // The row lock (`FOR UPDATE`) makes the earlier user the one this write replaced,
            // also when another writer changed it a moment before: the lock waits for that
            // writer and reads its committed row.
            put: format!(
                "WITH old AS (
                    SELECT user_id FROM {s}.pairings
                    WHERE channel = $1 AND channel_user = $2 FOR UPDATE
                ), created AS (
                    INSERT INTO {s}.pairings (channel, channel_user, user_id)
                    SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM old)
                    ON CONFLICT (channel, channel_user) DO NOTHING
                    RETURNING 1
                ), moved AS (
                    UPDATE {s}.pairings SET user_id = $3
                    WHERE channel = $1 AND channel_user = $2 AND EXISTS (SELECT 1 FROM old)
                    RETURNING 1
                )
                SELECT (SELECT user_id FROM old),
                    EXISTS (SELECT 1 FROM created) OR EXISTS (SELECT 1 FROM moved)"
            ),
            remove: format!(
                "DELETE FROM {s}.pairings WHERE channel = $1 AND channel_user = $2
                RETURNING user_id"
            ),
            of_user: format!(
                "SELECT channel, channel_user FROM {s}.pairings WHERE user_id = $1
                ORDER BY channel, channel_user"
            ),
            remove_user: format!(
                "WITH gone AS (DELETE FROM {s}.pairings WHERE user_id = $1 RETURNING 1)
                SELECT count(*) FROM gone"
            ),
        }
    }
}

/// Pairings in PostgreSQL: the pairing store that goes with [`PostgresStore`], in the same
/// schema and on the same pool, shared by every process using the schema. A server that is down
/// answers [`PairingError::Unavailable`] within the store's timeouts. Cloning is cheap and
/// shares the pool.
#[derive(Clone)]
pub struct PostgresPairingStore {
    /// The session store whose pool and schema the pairings share.
    store: PostgresStore,
    /// The statements of its schema.
    sql: Arc<Sql>,
}

impl std::fmt::Debug for PostgresPairingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresPairingStore")
            .field("schema", &self.store.schema())
            .finish_non_exhaustive()
    }
}

impl PostgresPairingStore {
    /// The pairings beside `store`: its schema's `pairings` table, over its pool (the table
    /// exists: connecting the store ran the migrations).
    pub fn new(store: &PostgresStore) -> Self {
        Self {
            sql: Arc::new(Sql::new(store.schema())),
            store: store.clone(),
        }
    }

    /// Connects to `url` as [`PostgresStore::connect`] does (the same URL and options, running
    /// the same migrations, refusing a schema a newer turnstile migrated), for pairings alone.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, PairingError> {
        let store = PostgresStore::connect(url, options)
            .await
            .map_err(pairing_error)?;
        Ok(Self::new(&store))
    }
}

/// What the session store's error means for a pairing call.
fn pairing_error(error: StoreError) -> PairingError {
    match error {
        StoreError::InvalidRequest(detail) => PairingError::InvalidRequest(detail),
        StoreError::Corrupt { key, detail } => PairingError::Corrupt { place: key, detail },
        StoreError::NewerLayout {
            place,
            found,
            supported,
            ..
        } => PairingError::Schema {
            place: format!("postgres {place}"),
            found,
            supported,
        },
        StoreError::Io { op, path, source } => PairingError::Io { op, path, source },
        StoreError::Unavailable { detail, .. } => unavailable(detail),
        other => unavailable(other),
    }
}

fn unavailable(detail: impl std::fmt::Display) -> PairingError {
    PairingError::Unavailable {
        backend: "postgres",
        detail: detail.to_string(),
    }
}

/// PostgreSQL text cannot hold NUL: such an id is refused here, clearly, rather than by the
/// server as an encoding error.
fn check_ids(ids: &[(&str, &str)]) -> Result<(), PairingError> {
    match ids.iter().find(|(_, id)| id.contains('\0')) {
        Some((what, _)) => Err(PairingError::InvalidRequest(format!(
            "the {what} contains a NUL character, which PostgreSQL cannot store"
        ))),
        None => Ok(()),
    }
}

#[async_trait]
impl PairingStore for PostgresPairingStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    async fn get(&self, channel: &str, channel_user: &str) -> Result<Option<String>, PairingError> {
        check_ids(&[("channel", channel), ("channel user id", channel_user)])?;
        let rows = self
            .store
            .read("pairings", &self.sql.get, &[&channel, &channel_user])
            .await
            .map_err(pairing_error)?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn put(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, PairingError> {
        check_ids(&[
            ("channel", channel),
            ("channel user id", channel_user),
            ("user id", user),
        ])?;
        for _ in 0..PUT_ATTEMPTS {
            let rows = self
                .store
                .query("pairings", &self.sql.put, &[&channel, &channel_user, &user])
                .await
                .map_err(pairing_error)?;
            let row = rows
                .first()
                .ok_or_else(|| unavailable("the pairing statement returned no row"))?;
            if row.get::<_, bool>(1) {
                return Ok(row.get(0));
            }
        }
        Err(unavailable(format!(
            "the account was created by concurrent writers {PUT_ATTEMPTS} times in a row while \
             this pairing was written; nothing was changed by this call"
        )))
    }

    async fn remove(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, PairingError> {
        check_ids(&[("channel", channel), ("channel user id", channel_user)])?;
        let rows = self
            .store
            .query("pairings", &self.sql.remove, &[&channel, &channel_user])
            .await
            .map_err(pairing_error)?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn of_user(&self, user: &str) -> Result<Vec<Pairing>, PairingError> {
        check_ids(&[("user id", user)])?;
        let rows = self
            .store
            .read("pairings", &self.sql.of_user, &[&user])
            .await
            .map_err(pairing_error)?;
        Ok(rows
            .iter()
            .map(|row| Pairing {
                channel: row.get(0),
                channel_user: row.get(1),
                user: user.to_owned(),
            })
            .collect())
    }

    async fn remove_user(&self, user: &str) -> Result<u64, PairingError> {
        check_ids(&[("user id", user)])?;
        let rows = self
            .store
            .query("pairings", &self.sql.remove_user, &[&user])
            .await
            .map_err(pairing_error)?;
        let removed: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok(u64::try_from(removed).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_in_any_id_is_refused_by_name() {
        assert!(check_ids(&[("channel", "slack"), ("user id", "alice")]).is_ok());
        let err = check_ids(&[("channel", "slack"), ("user id", "al\0ice")]).unwrap_err();
        assert!(
            matches!(err, PairingError::InvalidRequest(ref m) if m.contains("user id")),
            "{err}"
        );
    }
}
