//! A throwaway `redis-server` for tests, or the one named by `REDIS_URL`; and what the other
//! Redis helpers (`redis_cluster.rs`, `redis_replica.rs`) share: starting a server process, free
//! ports, fresh prefixes, one-off queries.
//!
//! A test that needs Redis never skips: when `redis-server` is not installed it fails, saying
//! how to install it (or, for the tests on one server, to set `REDIS_URL`).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::Store;

/// How long a freshly started server may take to answer PING.
const STARTUP: Duration = Duration::from_secs(10);

/// What to do when the Redis tools are missing.
const INSTALL: &str = "the Redis tests start their own servers: install them with \
    `apt-get install redis-server` (which brings redis-cli too), or, for the tests on a \
    single server, set REDIS_URL to a server to use";

/// A Redis to test against; a server started here is killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    url: String,
}

impl RedisServer {
    /// `REDIS_URL` if set, else a new `redis-server` on a free loopback port with persistence
    /// off. Fails the test when `redis-server` is not installed.
    pub fn start() -> RedisServer {
        match std::env::var("REDIS_URL") {
            Ok(url) => RedisServer { child: None, url },
            Err(_) => Self::start_private(),
        }
    }

    /// A new `redis-server` of this test's own, even when `REDIS_URL` is set: for tests that
    /// stop the server. Fails the test when `redis-server` is not installed.
    pub fn start_private() -> RedisServer {
        for _ in 0..3 {
            let port = free_port();
            let server = RedisServer {
                child: Some(spawn_server(None, port, &[])),
                url: format!("redis://127.0.0.1:{port}/"),
            };
            let deadline = Instant::now() + STARTUP;
            if poll(deadline, || {
                query(port, &["PING"]).is_some_and(|r| r == "PONG")
            })
            .is_ok()
            {
                return server;
            }
            // Most likely another process took the port between our probe and the server's
            // bind; try another one.
        }
        panic!("redis-server did not start answering within {STARTUP:?}");
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A store on this server with a fresh, random prefix: an empty namespace.
    pub async fn store(&self) -> RedisStore {
        self.store_with(RedisOptions::default().with_prefix(fresh_prefix()))
            .await
    }

    /// A store on this server with `options`.
    pub async fn store_with(&self, options: RedisOptions) -> RedisStore {
        RedisStore::connect(&self.url, options)
            .await
            .expect("connect to the test redis")
    }

    /// Two stores on one fresh prefix, each with its own connection and cached heads, as two
    /// processes sharing this server would have.
    pub async fn two_handles(&self) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let options = RedisOptions::default().with_prefix(fresh_prefix());
        let a = self.store_with(options.clone()).await;
        (Arc::new(a), Arc::new(self.store_with(options).await))
    }

    /// A plain connection to this server, to look at or disturb what a store wrote.
    pub async fn connection(&self) -> MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .expect("a valid redis URL")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis")
    }

    /// How many `EVALSHA`s the server ran since its statistics were last reset
    /// ([`RedisServer::reset_stats`]); meaningful on a server of the test's own.
    pub async fn scripts_run(&self) -> u64 {
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.connection().await)
            .await
            .expect("INFO commandstats");
        stats
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().expect("a count"))
    }

    /// The name of the one session head stored under `prefix` (fails the test unless there
    /// is exactly one), for tests that rewrite what a store wrote.
    pub async fn only_session_head(&self, prefix: &str) -> String {
        let heads: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:s:*:h"))
            .query_async(&mut self.connection().await)
            .await
            .expect("KEYS");
        assert_eq!(heads.len(), 1, "one session head: {heads:?}");
        heads.into_iter().next().expect("one head")
    }

    /// Resets the server's command statistics (`CONFIG RESETSTAT`).
    pub async fn reset_stats(&self) {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut self.connection().await)
            .await
            .expect("CONFIG RESETSTAT");
    }

    /// Starts a server started here (and stopped) again on the same port, empty. Fails the test
    /// when it does not answer in time.
    pub fn restart(&mut self) {
        self.stop();
        let port: u16 = self
            .url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a private server's URL ends with its port");
        self.child = Some(spawn_server(None, port, &[]));
        poll(Instant::now() + STARTUP, || {
            query(port, &["PING"]).is_some_and(|r| r == "PONG")
        })
        .expect("the restarted redis-server answers");
    }

    /// Stops a server started here (no-op for `REDIS_URL`).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts a `redis-server` without persistence on `port` (in `dir`, if given, where it keeps
/// any file it writes), with `extra` arguments. Fails the test, saying how to install it, when
/// `redis-server` is not installed.
pub fn spawn_server(dir: Option<&Path>, port: u16, extra: &[&str]) -> Child {
    let mut command = Command::new("redis-server");
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => panic!("redis-server is not installed: {INSTALL}"),
            _ => panic!("could not start redis-server: {e}"),
        })
}

/// Runs `redis-cli` with `args`; its output. Fails the test, saying how to install it, when
/// `redis-cli` is not installed.
pub fn redis_cli(args: &[String]) -> std::process::Output {
    Command::new("redis-cli")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => panic!("redis-cli is not installed: {INSTALL}"),
            _ => panic!("could not run redis-cli: {e}"),
        })
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a probe socket");
    listener.local_addr().expect("probe address").port()
}

/// A prefix no other test uses: an empty namespace on a shared server.
pub fn fresh_prefix() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
}

/// Retries `ready` every 20 ms until it holds or `deadline` passes. For starting servers,
/// where a server that does not come up is retried on other ports rather than failing the
/// test at once; a test's own waits use `harness::eventually*`.
pub fn poll(deadline: Instant, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(())
}

/// One command to the server on `port`, its reply as text; `None` if it does not answer
/// within half a second (a process that took the port and never answers included).
pub fn query(port: u16, args: &[&str]) -> Option<String> {
    const PATIENCE: Duration = Duration::from_millis(500);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut conn = client.get_connection_with_timeout(PATIENCE).ok()?;
    conn.set_read_timeout(Some(PATIENCE)).ok()?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<String>(&mut conn).ok()
}

/// Every key under `prefix` with its `DUMP` (the value's exact serialised bytes), to check
/// that an operation left every key byte-for-byte as it was.
pub async fn dump(conn: &mut MultiplexedConnection, prefix: &str) -> BTreeMap<String, Vec<u8>> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(conn)
        .await
        .expect("KEYS");
    let mut out = BTreeMap::new();
    for key in keys {
        let bytes: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .expect("DUMP");
        out.insert(key, bytes);
    }
    out
}
