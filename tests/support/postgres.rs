//! A throwaway PostgreSQL database for tests: created under a unique name on the server named by
//! `TURNSTILE_TEST_POSTGRES` (default [`DEFAULT_SERVER`]) and dropped when the guard drops.
//!
//! A test that needs PostgreSQL fails with a message saying how to start it when the server
//! cannot be reached: it never passes by skipping.

use std::str::FromStr;

use tokio_postgres::NoTls;
use turnstile::backend::{PostgresOptions, PostgresStore};

/// The server the tests use unless `TURNSTILE_TEST_POSTGRES` names another (any database on it
/// the user may connect to; databases are created beside it).
pub const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Longest a test waits for the server to reach a state it set up.
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A database of its own for one test; dropped (with its connections) on drop.
pub struct TestDatabase {
    /// The database's name: `turnstile_test_` and a random suffix.
    name: String,
    /// The URL of the server's maintenance database, for creating and dropping.
    server: String,
    /// The URL of this database.
    url: String,
}

/// The server URL to use.
pub fn server_url() -> String {
    std::env::var("TURNSTILE_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_SERVER.to_owned())
}

/// A plain connection to `url`, its connection task spawned.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {url}: {e}. These tests need it: start it \
                 (pg_ctlcluster 15 main start) or set TURNSTILE_TEST_POSTGRES to a server URL"
            )
        });
    tokio::spawn(connection);
    client
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let config = tokio_postgres::Config::from_str(url).expect("a valid server URL");
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    match config.get_dbname() {
        Some(old) => {
            let cut = base
                .rfind(&format!("/{old}"))
                .expect("the URL names its database");
            format!("{}/{database}{query}", &base[..cut])
        }
        None => format!("{}/{database}{query}", base.trim_end_matches('/')),
    }
}

impl TestDatabase {
    /// Creates a fresh, empty database.
    pub async fn create() -> Self {
        let server = server_url();
        let name = format!("turnstile_test_{}", uuid::Uuid::new_v4().simple());
        connect(&server)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create a test database");
        let url = with_database(&server, &name);
        Self { name, server, url }
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A store in a fresh schema of this database: an empty namespace.
    pub async fn store(&self) -> PostgresStore {
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        self.store_with(PostgresOptions::default().with_schema(schema))
            .await
    }

    /// A store on this database with `options`.
    pub async fn store_with(&self, options: PostgresOptions) -> PostgresStore {
        PostgresStore::connect(&self.url, options)
            .await
            .expect("connect to the test database")
    }

    /// A plain connection to this database, to look at or disturb what the store does.
    pub async fn admin(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }

    /// Terminates every other connection to this database, as a server restart would. Returns
    /// how many were terminated.
    pub async fn terminate_connections(&self, admin: &tokio_postgres::Client) -> usize {
        let rows = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&self.name],
            )
            .await
            .expect("terminate connections");
        rows.len()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Its own thread and runtime: drop may run inside (or outside) a test's runtime.
        let (server, name) = (self.server.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to drop the test database");
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&server, NoTls).await?;
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "could not drop the test database {}: {dropped:?}",
                self.name
            );
        }
    }
}

/// The backend pid of a connection to `database` that waits for a lock, once there is one
/// (polled; fails the test after [`WAIT`]).
pub async fn blocked_backend(admin: &tokio_postgres::Client, database: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let rows = admin
            .query(
                "SELECT pid FROM pg_stat_activity \
                 WHERE datname = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                &[&database],
            )
            .await
            .expect("read pg_stat_activity");
        if let Some(row) = rows.first() {
            return row.get(0);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no connection to {database} started waiting for a lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}
