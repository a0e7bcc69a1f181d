//! The store's tables, created by versioned migrations run on connect.
//!
//! `{s}` in a migration stands for the configured schema (checked by
//! [`PostgresOptions::check`](super::PostgresOptions) to be a plain identifier). Migrations only
//! ever get added at the end: a database records the ones it ran in `{s}.schema_migrations`, and
//! one that ran a migration this build does not know was upgraded by a newer turnstile, so it is
//! refused rather than written with an older idea of the layout.

use deadpool_postgres::Client;
use sha2::{Digest, Sha256};

use super::errors::pg_error;
use crate::store::StoreError;

/// The migrations, oldest first; the database layout version is how many of them ran.
const MIGRATIONS: &[&str] = &[
    // 1: heads, events, shared state. Ids use the "C" collation: listings are ordered by bytes,
    // as in every other store, and comparisons skip locale rules.
    r#"
    CREATE TABLE {s}.heads (
        user_id    text COLLATE "C" NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        version    bigint NOT NULL,
        epoch      bigint NOT NULL,
        updated_ms bigint NOT NULL,
        record     text NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    CREATE INDEX heads_by_update ON {s}.heads (updated_ms, user_id, session_id);
    CREATE TABLE {s}.events (
        user_id    text COLLATE "C" NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        seq        bigint NOT NULL,
        body       text NOT NULL,
        PRIMARY KEY (user_id, session_id, seq)
    );
    CREATE TABLE {s}.user_state (
        user_id text COLLATE "C" PRIMARY KEY,
        state   jsonb NOT NULL
    );
    CREATE TABLE {s}.app_state (
        id    boolean PRIMARY KEY DEFAULT true CHECK (id),
        state jsonb NOT NULL
    );
    INSERT INTO {s}.app_state (state) VALUES ('{}');
    "#,
    // 2: session leases (one owner per session across processes), per-session epoch counters
    // that outlive the sessions, and the newest epoch that wrote each head. Expiry follows the
    // database server's clock, the one clock every process shares.
    r#"
    CREATE TABLE {s}.leases (
        user_id    text COLLATE "C" NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        token      text NOT NULL,
        address    text NOT NULL,
        instance   text NOT NULL,
        epoch      bigint NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    CREATE TABLE {s}.lease_epochs (
        user_id    text COLLATE "C" NOT NULL,
        session_id text COLLATE "C" NOT NULL,
        epoch      bigint NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    ALTER TABLE {s}.heads ADD COLUMN fence bigint NOT NULL DEFAULT 0;
    "#,
    // 3: channel pairings (`PostgresPairingStore`): one canonical user per channel account, and
    // an index that finds and deletes a user's accounts in order.
    r#"
    CREATE TABLE {s}.pairings (
        channel      text COLLATE "C" NOT NULL,
        channel_user text COLLATE "C" NOT NULL,
        user_id      text COLLATE "C" NOT NULL,
        PRIMARY KEY (channel, channel_user)
    );
    CREATE INDEX pairings_by_user ON {s}.pairings (user_id, channel, channel_user);
    "#,
];

/// The database layout version this build writes and the newest it accepts.
pub const LAYOUT_VERSION: u32 = MIGRATIONS.len() as u32;

/// Brings the schema up to [`LAYOUT_VERSION`] in one transaction, serialised across processes
/// by an advisory lock; refuses a schema a newer build migrated past it.
pub(super) async fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_error("migrations", e))?;
    let run = async {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_id(schema)])
            .await?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
                 version    integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );"
        ))
        .await?;
        let row = tx
            .query_one(
                &format!("SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations"),
                &[],
            )
            .await?;
        Ok::<i32, tokio_postgres::Error>(row.get(0))
    };
    let found = run.await.map_err(|e| pg_error("migrations", e))?;
    let found = u32::try_from(found).unwrap_or(0);
    if found > LAYOUT_VERSION {
        return Err(StoreError::NewerLayout {
            backend: "postgres",
            place: format!("schema {schema}"),
            found,
            supported: LAYOUT_VERSION,
        });
    }
    for (version, sql) in (1..).zip(MIGRATIONS).skip(found as usize) {
        let apply = async {
            tx.batch_execute(&sql.replace("{s}", schema)).await?;
            tx.execute(
                &format!("INSERT INTO {schema}.schema_migrations (version) VALUES ($1)"),
                &[&version],
            )
            .await
        };
        apply
            .await
            .map_err(|e| pg_error(&format!("migration {version}"), e))?;
    }
    tx.commit().await.map_err(|e| pg_error("migrations", e))?;
    if found < LAYOUT_VERSION {
        tracing::info!(
            schema,
            from = found,
            to = LAYOUT_VERSION,
            "postgres store migrated"
        );
    }
    Ok(())
}

/// The advisory lock that serialises migrations of one schema.
fn lock_id(schema: &str) -> i64 {
    let digest = Sha256::digest(format!("turnstile migrations {schema}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}
