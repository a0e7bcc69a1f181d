//! A throwaway three-master Redis Cluster for tests, on free loopback ports in a temporary
//! folder, killed on drop.
//!
//! When `redis-server` is not installed, tests print a skip message — unless `CI=true`, where a
//! missing server fails the test, so that CI can never pass by skipping.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use turnstile::store::{RedisOptions, RedisStore};

use super::redis_server::free_port;

/// How long the cluster may take from start to `cluster_state:ok` on every node.
const STARTUP: Duration = Duration::from_secs(30);

/// Masters in the test cluster: the fewest `redis-cli --cluster create` accepts.
const NODES: usize = 3;

/// A running cluster; its servers are killed and its folder removed on drop.
pub struct RedisCluster {
    children: Vec<Child>,
    ports: Vec<u16>,
    /// Holds the nodes' cluster config files; removed on drop.
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts a cluster. `None` means "skip": no server is installed and this is not CI.
    pub fn start() -> Option<RedisCluster> {
        for _ in 0..3 {
            match Self::try_start()? {
                Ok(cluster) => return Some(cluster),
                // Most likely another process took a port between our probe and the bind.
                Err(why) => eprintln!("the test cluster did not form ({why}); trying again"),
            }
        }
        panic!("a Redis Cluster did not form within three attempts");
    }

    fn try_start() -> Option<Result<RedisCluster, String>> {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut cluster = RedisCluster {
            children: Vec::new(),
            ports: Vec::new(),
            _dir: dir,
        };
        for i in 0..NODES {
            let (port, bus) = (free_port(), free_port());
            let spawned = Command::new("redis-server")
                .current_dir(cluster._dir.path())
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-port", &bus.to_string()])
                .args(["--cluster-config-file", &format!("nodes-{i}.conf")])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            match spawned {
                Ok(child) => cluster.children.push(child),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    assert!(
                        std::env::var("CI").as_deref() != Ok("true"),
                        "redis-server is not installed, and CI=true requires the Redis tests to run"
                    );
                    eprintln!("SKIPPED: redis-server is not installed");
                    return None;
                }
                Err(e) => panic!("could not start redis-server: {e}"),
            }
            cluster.ports.push(port);
        }
        let deadline = Instant::now() + STARTUP;
        Some(cluster.form(deadline).map(|()| cluster))
    }

    /// Waits for every node to answer, joins them into one cluster, and waits until every
    /// node says `cluster_state:ok`.
    fn form(&self, deadline: Instant) -> Result<(), String> {
        for &port in &self.ports {
            poll(deadline, || {
                node_query(port, &["PING"]).is_some_and(|r| r == "PONG")
            })
            .map_err(|_| format!("node {port} never answered PING"))?;
        }
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
        if !created.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&created.stderr)
            ));
        }
        for &port in &self.ports {
            poll(deadline, || {
                node_query(port, &["CLUSTER", "INFO"])
                    .is_some_and(|info| info.contains("cluster_state:ok"))
            })
            .map_err(|_| format!("node {port} never reached cluster_state:ok"))?;
        }
        Ok(())
    }

    /// The store URL of the cluster: `redis+cluster://` and every node.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", nodes.join(","))
    }

    /// Each node's own `redis://` URL, to ask one node directly (`KEYS`, `CLUSTER KEYSLOT`).
    pub fn node_urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// A store on this cluster with a fresh, random prefix: an empty namespace.
    pub async fn store(&self) -> RedisStore {
        self.store_with(RedisOptions::default().with_prefix(fresh_prefix()))
            .await
    }

    /// A store on this cluster with `options`.
    pub async fn store_with(&self, options: RedisOptions) -> RedisStore {
        RedisStore::connect(&self.url(), options)
            .await
            .expect("connect to the test cluster")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A prefix no other test uses.
pub fn fresh_prefix() -> String {
    format!("test-{}", uuid::Uuid::new_v4().simple())
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

/// One command to one node, its reply as text; `None` if the node does not answer.
fn node_query(port: u16, args: &[&str]) -> Option<String> {
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
