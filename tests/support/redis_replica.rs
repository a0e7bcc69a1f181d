//! A throwaway Redis primary with one replica (`redis-server --replicaof`), on free loopback
//! ports in a temporary folder, for the tests of appends that wait for replicas. Both servers
//! are killed on drop (a paused replica is resumed first).
//!
//! A test that needs them never skips: when `redis-server` is not installed, it fails saying how
//! to install it.

use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::Store;

use super::harness::eventually_ok;
use super::redis_server::{free_port, fresh_prefix, poll, query, spawn_server};

/// How long the pair may take from start to a replica in sync.
const STARTUP: Duration = Duration::from_secs(30);

/// A primary and its replica.
pub struct ReplicatedRedis {
    primary: Child,
    replica: Child,
    primary_port: u16,
    replica_port: u16,
    paused: bool,
    /// The servers' working folder (a replica keeps the snapshot it syncs from there).
    _dir: tempfile::TempDir,
}

impl ReplicatedRedis {
    /// Starts a primary and a replica and waits until the replica is in sync. Fails the test
    /// when `redis-server` is not installed.
    pub fn start() -> ReplicatedRedis {
        for _ in 0..3 {
            match Self::try_start() {
                Ok(pair) => return pair,
                // Most likely another process took a port between our probe and the bind.
                Err(why) => eprintln!("the primary and replica did not start ({why}); again"),
            }
        }
        panic!("a Redis primary with a replica did not start within three attempts");
    }

    fn try_start() -> Result<ReplicatedRedis, String> {
        let dir = tempfile::tempdir().expect("temporary folder");
        let (primary_port, replica_port) = (free_port(), free_port());
        // No delay before a full sync: the replica should be in step at once.
        let primary = spawn(&dir, primary_port, &["--repl-diskless-sync-delay", "0"]);
        let primary_at = primary_port.to_string();
        let replica = spawn(
            &dir,
            replica_port,
            &["--replicaof", "127.0.0.1", &primary_at],
        );
        let pair = ReplicatedRedis {
            primary,
            replica,
            primary_port,
            replica_port,
            paused: false,
            _dir: dir,
        };
        let deadline = Instant::now() + STARTUP;
        let synced = poll(deadline, || {
            let up = query(replica_port, &["INFO", "replication"])
                .is_some_and(|info| info.contains("master_link_status:up"));
            let online = query(primary_port, &["INFO", "replication"])
                .is_some_and(|info| info.contains("state=online"));
            up && online
        });
        synced
            .map(|()| pair)
            .map_err(|()| "the replica never came in sync".into())
    }

    /// The primary's URL, with `query` (turnstile's `replicas=…` parameters) when not empty.
    pub fn url(&self, query: &str) -> String {
        let base = format!("redis://127.0.0.1:{}/", self.primary_port);
        if query.is_empty() {
            base
        } else {
            format!("{base}?{query}")
        }
    }

    /// The replica's own URL, to read it directly.
    pub fn replica_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.replica_port)
    }

    /// A store on the primary under `prefix`, with `query` in its URL.
    pub async fn store(
        &self,
        prefix: &str,
        query: &str,
    ) -> Result<RedisStore, turnstile::StoreError> {
        RedisStore::connect(
            &self.url(query),
            RedisOptions::default().with_prefix(prefix),
        )
        .await
    }

    /// A store on the primary with a fresh prefix and `query` in its URL.
    pub async fn fresh_store(&self, query: &str) -> RedisStore {
        self.store(&fresh_prefix(), query)
            .await
            .expect("connect to the test primary")
    }

    /// Two stores on the primary on one fresh prefix, with `query` in their URL, each with its
    /// own connections and cached heads, as two processes would have.
    pub async fn two_handles(&self, query: &str) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let prefix = fresh_prefix();
        let connect = || async {
            let store = self.store(&prefix, query).await;
            Arc::new(store.expect("connect to the test primary")) as Arc<dyn Store>
        };
        (connect().await, connect().await)
    }

    /// A store reading the replica under `prefix`, once the replica has the prefix's layout
    /// mark (a store never writes on connect where the mark is present, and a replica refuses
    /// writes).
    pub async fn replica_reader(&self, prefix: &str) -> RedisStore {
        eventually_ok(
            "the replica to have the prefix's layout mark",
            Duration::from_millis(5),
            || async move {
                let options = RedisOptions::default().with_prefix(prefix);
                RedisStore::connect(&self.replica_url(), options).await
            },
        )
        .await
    }

    /// Stops the replica (`SIGSTOP`): it neither reads the replication stream nor confirms.
    pub fn pause_replica(&mut self) {
        signal(&self.replica, "STOP");
        self.paused = true;
    }

    /// Kills the replica (`SIGKILL`), as a crash would: the primary drops its link at once and
    /// has no replica until [`Self::restart_replica`].
    pub fn kill_replica(&mut self) {
        if self.paused {
            signal(&self.replica, "CONT");
            self.paused = false;
        }
        let _ = self.replica.kill();
        let _ = self.replica.wait();
    }

    /// Starts the replica again (after [`Self::kill_replica`]) on its port, and waits until it
    /// is in sync with the primary.
    pub async fn restart_replica(&mut self) {
        let primary_at = self.primary_port.to_string();
        self.replica = spawn(
            &self._dir,
            self.replica_port,
            &["--replicaof", "127.0.0.1", &primary_at],
        );
        self.until_replica_caught_up().await;
    }

    /// Lets a paused replica go on (`SIGCONT`).
    pub fn resume_replica(&mut self) {
        signal(&self.replica, "CONT");
        self.paused = false;
    }

    /// Waits until the replica is online and has confirmed all the primary sent it: after
    /// [`Self::resume_replica`], the moment the replica is back (it confirms what it missed
    /// while stopped at its own pace, up to a second later).
    pub async fn until_replica_caught_up(&self) {
        let what = "the replica to confirm all the primary sent it";
        eventually_ok(what, Duration::from_millis(5), || async {
            let info = query(self.primary_port, &["INFO", "replication"]).unwrap_or_default();
            let field = |name: &str| {
                info.split(['\r', '\n', ','])
                    .find_map(|part| part.strip_prefix(name))
                    .map(str::to_owned)
            };
            let sent = field("master_repl_offset:");
            let confirmed = field("offset=");
            let online = info.contains("state=online");
            if online && sent.is_some() && sent == confirmed {
                Ok(())
            } else {
                Err(info)
            }
        })
        .await;
    }

    /// One command to the primary, its reply as text.
    pub fn primary_query(&self, args: &[&str]) -> Option<String> {
        query(self.primary_port, args)
    }
}

impl Drop for ReplicatedRedis {
    fn drop(&mut self) {
        if self.paused {
            signal(&self.replica, "CONT");
        }
        for child in [&mut self.replica, &mut self.primary] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts a `redis-server` without persistence on `port`, in `dir`, with `extra` arguments.
fn spawn(dir: &tempfile::TempDir, port: u16, extra: &[&str]) -> Child {
    let dbfilename = format!("dump-{port}.rdb");
    let mut args = vec!["--dbfilename", &dbfilename];
    args.extend_from_slice(extra);
    spawn_server(Some(dir.path()), port, &args)
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {} failed", child.id());
}
