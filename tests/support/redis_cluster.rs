//! A throwaway three-master Redis Cluster for tests, on free loopback ports in a temporary
//! folder, killed on drop.
//!
//! A test that needs it never skips: when `redis-server` or `redis-cli` is not installed, it
//! fails saying how to install them.

use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use turnstile::store::{RedisOptions, RedisStore};
use turnstile::Store;

use super::redis_server::{free_port, fresh_prefix, poll, query, redis_cli, spawn_server};

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
    /// Starts a cluster. Fails the test when `redis-server` or `redis-cli` is not installed.
    pub fn start() -> RedisCluster {
        for _ in 0..3 {
            match Self::try_start() {
                Ok(cluster) => return cluster,
                // Most likely another process took a port between our probe and the bind.
                Err(why) => eprintln!("the test cluster did not form ({why}); trying again"),
            }
        }
        panic!("a Redis Cluster did not form within three attempts");
    }

    fn try_start() -> Result<RedisCluster, String> {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut cluster = RedisCluster {
            children: Vec::new(),
            ports: Vec::new(),
            _dir: dir,
        };
        for i in 0..NODES {
            let (port, bus) = (free_port(), free_port());
            let (bus, config) = (bus.to_string(), format!("nodes-{i}.conf"));
            let child = spawn_server(
                Some(cluster._dir.path()),
                port,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus,
                    "--cluster-config-file",
                    &config,
                ],
            );
            cluster.children.push(child);
            cluster.ports.push(port);
        }
        let deadline = Instant::now() + STARTUP;
        cluster.form(deadline).map(|()| cluster)
    }

    /// Waits for every node to answer, joins them into one cluster, and waits until every
    /// node says `cluster_state:ok`.
    fn form(&self, deadline: Instant) -> Result<(), String> {
        for &port in &self.ports {
            poll(deadline, || {
                query(port, &["PING"]).is_some_and(|r| r == "PONG")
            })
            .map_err(|_| format!("node {port} never answered PING"))?;
        }
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(self.ports.iter().map(|p| format!("127.0.0.1:{p}")));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
        let created = redis_cli(&args);
        if !created.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&created.stderr)
            ));
        }
        for &port in &self.ports {
            poll(deadline, || {
                query(port, &["CLUSTER", "INFO"])
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

    /// A plain connection to each node, to ask one node directly (`KEYS`, `CLUSTER KEYSLOT`).
    pub async fn node_connections(&self) -> Vec<MultiplexedConnection> {
        let mut nodes = Vec::new();
        for port in &self.ports {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .expect("a valid node URL");
            let conn = client.get_multiplexed_async_connection().await;
            nodes.push(conn.expect("connect to a node"));
        }
        nodes
    }

    /// A store on this cluster with a fresh, random prefix: an empty namespace.
    pub async fn store(&self) -> RedisStore {
        self.store_with(RedisOptions::default().with_prefix(fresh_prefix()))
            .await
    }

    /// Two stores on one fresh prefix, each with its own connections and cached heads, as two
    /// processes sharing this cluster would have.
    pub async fn two_handles(&self) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let options = RedisOptions::default().with_prefix(fresh_prefix());
        let a = self.store_with(options.clone()).await;
        (Arc::new(a), Arc::new(self.store_with(options).await))
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
