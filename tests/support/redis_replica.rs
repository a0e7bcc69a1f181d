//! A throwaway Redis primary with one replica (`redis-server --replicaof`), on free loopback
//! ports in a temporary folder, for the tests of appends that wait for replicas. Both servers
//! are killed on drop (a paused replica is resumed first).
//!
//! When `redis-server` is not installed, tests print a skip message — unless `CI=true`, where a
//! missing server fails the test, so that CI can never pass by skipping.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use turnstile::store::{RedisOptions, RedisStore};

use super::redis_cluster::fresh_prefix;
use super::redis_server::free_port;

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
    /// Starts a primary and a replica and waits until the replica is in sync. `None` means
    /// "skip": no server is installed and this is not CI.
    pub fn start() -> Option<ReplicatedRedis> {
        for _ in 0..3 {
            match Self::try_start()? {
                Ok(pair) => return Some(pair),
                // Most likely another process took a port between our probe and the bind.
                Err(why) => eprintln!("the primary and replica did not start ({why}); again"),
            }
        }
        panic!("a Redis primary with a replica did not start within three attempts");
    }

    fn try_start() -> Option<Result<ReplicatedRedis, String>> {
        let dir = tempfile::tempdir().expect("temporary folder");
        let (primary_port, replica_port) = (free_port(), free_port());
        // No delay before a full sync: the replica should be in step at once.
        let primary = spawn(&dir, primary_port, &["--repl-diskless-sync-delay", "0"])?;
        let primary_at = primary_port.to_string();
        let replica = match spawn(
            &dir,
            replica_port,
            &["--replicaof", "127.0.0.1", &primary_at],
        ) {
            Some(replica) => replica,
            None => {
                let mut primary = primary;
                let _ = primary.kill();
                let _ = primary.wait();
                return None;
            }
        };
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
        Some(match synced {
            Ok(()) => Ok(pair),
            Err(()) => Err("the replica never came in sync".into()),
        })
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

    /// A store reading the replica under `prefix`, once the replica has the prefix's layout
    /// mark (a store never writes on connect where the mark is present, and a replica refuses
    /// writes).
    pub async fn replica_reader(&self, prefix: &str) -> RedisStore {
        let deadline = tokio::time::Instant::now() + super::harness::TIMEOUT;
        loop {
            let options = RedisOptions::default().with_prefix(prefix);
            match RedisStore::connect(&self.replica_url(), options).await {
                Ok(store) => return store,
                Err(e) => assert!(
                    tokio::time::Instant::now() < deadline,
                    "the replica never had the prefix's layout mark: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the replica (`SIGSTOP`): it neither reads the replication stream nor confirms.
    pub fn pause_replica(&mut self) {
        signal(&self.replica, "STOP");
        self.paused = true;
    }

    /// Lets a paused replica go on (`SIGCONT`).
    pub fn resume_replica(&mut self) {
        signal(&self.replica, "CONT");
        self.paused = false;
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
fn spawn(dir: &tempfile::TempDir, port: u16, extra: &[&str]) -> Option<Child> {
    let spawned = Command::new("redis-server")
        .current_dir(dir.path())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dbfilename", &format!("dump-{port}.rdb")])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        Ok(child) => Some(child),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "redis-server is not installed, and CI=true requires the Redis tests to run"
            );
            eprintln!("SKIPPED: redis-server is not installed");
            None
        }
        Err(e) => panic!("could not start redis-server: {e}"),
    }
}

fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {} failed", child.id());
}

/// Retries `ready` every 20 ms until it holds or `deadline` passes.
fn poll(deadline: Instant, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(())
}

/// One command to one server, its reply as text; `None` if it does not answer.
fn query(port: u16, args: &[&str]) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<String>(&mut conn).ok()
}
