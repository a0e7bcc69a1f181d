//! A throwaway Redis Cluster for tests — three masters, optionally each with a replica (six
//! nodes) — on free loopback ports in a temporary folder, killed on drop. Tests can find which
//! master serves a session and kill a node, as an operator's failure would.
//!
//! A test that needs it never skips: when `redis-server` or `redis-cli` is not installed, it
//! fails saying how to install them.

use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Value;
use sha2::{Digest, Sha256};
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::{SessionKey, Store};

use super::redis_server::{free_port, fresh_prefix, poll, query, redis_cli, spawn_server};

/// How long the cluster may take from start to `cluster_state:ok` on every node.
const STARTUP: Duration = Duration::from_secs(30);

/// Masters in the test cluster: the fewest `redis-cli --cluster create` accepts.
const MASTERS: usize = 3;

/// How long a node may be silent before the others mark it failed (`cluster-node-timeout`), in
/// milliseconds: short, so that a test's failover takes a second or two, not Redis's default
/// fifteen.
const NODE_TIMEOUT_MS: &str = "1000";

/// How a test cluster is laid out.
#[derive(Debug, Clone, Default)]
pub struct ClusterLayout {
    /// Give each master one replica (six nodes), so that a master's death is a failover.
    pub replicas: bool,
    /// Extra `redis-server` arguments for every node.
    pub args: Vec<String>,
}

/// A running cluster; its servers are killed and its folder removed on drop.
pub struct RedisCluster {
    /// Each node's process, `None` once killed.
    children: Vec<Option<Child>>,
    ports: Vec<u16>,
    /// Each node's cluster bus port.
    buses: Vec<u16>,
    layout: ClusterLayout,
    /// Holds the nodes' cluster config files; removed on drop.
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts a cluster of three masters. Fails the test when `redis-server` or `redis-cli` is
    /// not installed.
    pub fn start() -> RedisCluster {
        Self::start_with(ClusterLayout::default())
    }

    /// Starts a cluster laid out as `layout` says.
    pub fn start_with(layout: ClusterLayout) -> RedisCluster {
        for _ in 0..3 {
            match Self::try_start(&layout) {
                Ok(cluster) => return cluster,
                // Most likely another process took a port between our probe and the bind.
                Err(why) => eprintln!("the test cluster did not form ({why}); trying again"),
            }
        }
        panic!("a Redis Cluster did not form within three attempts");
    }

    fn try_start(layout: &ClusterLayout) -> Result<RedisCluster, String> {
        let dir = node_folder();
        let mut cluster = RedisCluster {
            children: Vec::new(),
            ports: Vec::new(),
            buses: Vec::new(),
            layout: layout.clone(),
            _dir: dir,
        };
        let nodes = if layout.replicas {
            2 * MASTERS
        } else {
            MASTERS
        };
        for i in 0..nodes {
            let (port, bus) = (free_port(), free_port());
            cluster.ports.push(port);
            cluster.buses.push(bus);
            let args = cluster.node_args(i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let child = spawn_server(Some(cluster._dir.path()), port, &args);
            cluster.children.push(Some(child));
        }
        let deadline = Instant::now() + STARTUP;
        cluster.form(deadline).map(|()| cluster)
    }

    /// The `redis-server` arguments of node `i` (the same at every start of it).
    fn node_args(&self, i: usize) -> Vec<String> {
        let mut args: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &self.buses[i].to_string(),
            "--cluster-config-file",
            &format!("nodes-{i}.conf"),
            "--cluster-node-timeout",
            NODE_TIMEOUT_MS,
        ]
        .map(String::from)
        .into();
        args.extend(self.layout.args.iter().cloned());
        args
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
        let replicas = if self.layout.replicas { "1" } else { "0" };
        args.extend(["--cluster-replicas", replicas, "--cluster-yes"].map(String::from));
        let created = redis_cli(&args);
        if !created.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&created.stderr)
            ));
        }
        self.until_ok(deadline)?;
        if self.layout.replicas {
            // A replica counts for a failover only once it has synced with its master.
            for &port in &self.ports {
                poll(deadline, || {
                    query(port, &["INFO", "replication"]).is_some_and(|info| {
                        info.contains("role:master") || info.contains("master_link_status:up")
                    })
                })
                .map_err(|_| format!("replica {port} never synced"))?;
            }
        }
        Ok(())
    }

    /// Waits until every live node says `cluster_state:ok`.
    fn until_ok(&self, deadline: Instant) -> Result<(), String> {
        for port in self.live_ports() {
            poll(deadline, || {
                query(port, &["CLUSTER", "INFO"])
                    .is_some_and(|info| info.contains("cluster_state:ok"))
            })
            .map_err(|_| format!("node {port} never reached cluster_state:ok"))?;
        }
        Ok(())
    }

    /// Waits (up to a startup's time) until every live node says `cluster_state:ok` again:
    /// after a failover, once the replica of the dead master was promoted.
    pub fn until_healed(&self) {
        self.until_ok(Instant::now() + STARTUP)
            .unwrap_or_else(|why| panic!("the cluster did not heal: {why}"));
    }

    fn live_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.children)
            .filter(|(_, child)| child.is_some())
            .map(|(port, _)| *port)
            .collect()
    }

    /// The port of the master that serves `key`'s slot now, asked of a live node.
    pub fn master_of(&self, key: &SessionKey) -> u16 {
        let tag = session_tag(key);
        for port in self.live_ports() {
            let Ok(mut conn) = sync_connection(port) else {
                continue;
            };
            let Ok(slot) = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&tag)
                .query::<i64>(&mut conn)
            else {
                continue;
            };
            let Ok(Value::Array(ranges)) = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn)
            else {
                continue;
            };
            if let Some(port) = ranges.iter().find_map(|range| master_of_range(range, slot)) {
                return port;
            }
        }
        panic!("no live node says which master serves {key}");
    }

    /// The ports of the masters now, by asking a live node.
    pub fn masters(&self) -> Vec<u16> {
        self.live_ports()
            .into_iter()
            .filter(|&port| {
                query(port, &["INFO", "replication"]).is_some_and(|i| i.contains("role:master"))
            })
            .collect()
    }

    /// Starts the node on `port` again (after [`RedisCluster::kill`]) with its old cluster
    /// config, as an operator restarting a crashed node would: it rejoins, as a replica of the
    /// master that took its place when it was one. Waits until it answers.
    pub fn restart(&mut self, port: u16) {
        let i = self
            .ports
            .iter()
            .position(|&p| p == port)
            .expect("a node of this cluster");
        assert!(self.children[i].is_none(), "node {port} is running");
        let args = self.node_args(i);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = spawn_server(Some(self._dir.path()), port, &args);
        self.children[i] = Some(child);
        poll(Instant::now() + STARTUP, || {
            query(port, &["PING"]).is_some_and(|r| r == "PONG")
        })
        .unwrap_or_else(|()| panic!("node {port} did not answer after its restart"));
    }

    /// Waits until the node on `port` is a replica whose link to its master is up.
    pub fn until_replica_synced(&self, port: u16) {
        poll(Instant::now() + STARTUP, || {
            query(port, &["INFO", "replication"])
                .is_some_and(|i| i.contains("role:slave") && i.contains("master_link_status:up"))
        })
        .unwrap_or_else(|()| panic!("node {port} did not sync as a replica"));
    }

    /// The replica of the master on `port`, asked of the nodes.
    pub fn replica_of(&self, master: u16) -> u16 {
        let needle = format!("master_port:{master}");
        self.live_ports()
            .into_iter()
            .find(|&port| {
                query(port, &["INFO", "replication"])
                    .is_some_and(|i| i.contains("role:slave") && i.contains(&needle))
            })
            .unwrap_or_else(|| panic!("no replica of master {master}"))
    }

    /// Moves the slot of `key`, which must hold no key, from its master to the master on `to`
    /// as a resharding does (`IMPORTING` on the new owner, `MIGRATING` on the old, then `NODE`
    /// on both): the old master answers `MOVED` for it at once, while the other nodes learn of
    /// it by gossip a moment later. Returns false, moving nothing, when the slot holds keys.
    pub fn move_empty_slot(&self, key: &SessionKey, to: u16) -> bool {
        let from = self.master_of(key);
        let mut conn = sync_connection(from).expect("connect to the slot's master");
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(session_tag(key))
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT");
        let keys: i64 = redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(slot)
            .query(&mut conn)
            .expect("CLUSTER COUNTKEYSINSLOT");
        if keys > 0 {
            return false;
        }
        let id = |port: u16| query(port, &["CLUSTER", "MYID"]).expect("CLUSTER MYID");
        let (from_id, to_id) = (id(from), id(to));
        let slot = slot.to_string();
        for (port, state, node) in [
            (to, "IMPORTING", &from_id),
            (from, "MIGRATING", &to_id),
            (to, "NODE", &to_id),
            (from, "NODE", &to_id),
        ] {
            let done = query(port, &["CLUSTER", "SETSLOT", &slot, state, node]);
            assert_eq!(
                done.as_deref(),
                Some("OK"),
                "SETSLOT {slot} {state} on {port}"
            );
        }
        true
    }

    /// Stops the node on `port` (`SIGSTOP`) until [`RedisCluster::resume`]: it keeps its
    /// connections but answers nothing, as a stalled host would.
    pub fn pause(&self, port: u16) {
        self.signal(port, "STOP");
    }

    /// Lets a paused node go on (`SIGCONT`).
    pub fn resume(&self, port: u16) {
        self.signal(port, "CONT");
    }

    fn signal(&self, port: u16, signal: &str) {
        let i = self
            .ports
            .iter()
            .position(|&p| p == port)
            .expect("a node of this cluster");
        let pid = self.children[i].as_ref().expect("a running node").id();
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Kills the node on `port` at once (`SIGKILL`), as a crash would.
    pub fn kill(&mut self, port: u16) {
        let i = self
            .ports
            .iter()
            .position(|&p| p == port)
            .expect("a node of this cluster");
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
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
        for mut child in self.children.iter_mut().filter_map(Option::take) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The documented hash tag of a session's keys, braces included: the first 16 hex digits of
/// the SHA-256 of its canonical encoding (`s`, then each id as an 8-byte big-endian length and
/// its bytes; `docs/stores.md`).
pub fn session_tag(key: &SessionKey) -> String {
    let mut canonical = vec![b's'];
    for id in [key.user_id(), key.session_id()] {
        canonical.extend_from_slice(&(id.len() as u64).to_be_bytes());
        canonical.extend_from_slice(id.as_bytes());
    }
    let hex: String = Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{{{}}}", &hex[..16])
}

/// The name of one of a session's keys under `prefix` (`h` head, `l` log…), as
/// `docs/stores.md` documents it: `P:s:{D[0..16]}D[16..]:suffix`.
pub fn session_key_name(prefix: &str, key: &SessionKey, suffix: &str) -> String {
    let tag = session_tag(key);
    let mut canonical = vec![b's'];
    for id in [key.user_id(), key.session_id()] {
        canonical.extend_from_slice(&(id.len() as u64).to_be_bytes());
        canonical.extend_from_slice(id.as_bytes());
    }
    let hex: String = Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{prefix}:s:{tag}{}:{suffix}", &hex[16..])
}

/// How many events the node on `port` holds in the log of `key` (under `prefix`), read there
/// with `READONLY`, so that a replica answers for itself.
pub fn log_length_on(port: u16, prefix: &str, key: &SessionKey) -> i64 {
    let mut conn = sync_connection(port).expect("connect to the node");
    let () = redis::cmd("READONLY").query(&mut conn).expect("READONLY");
    redis::cmd("LLEN")
        .arg(session_key_name(prefix, key, "l"))
        .query(&mut conn)
        .expect("LLEN")
}

fn sync_connection(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
    conn.set_read_timeout(Some(Duration::from_millis(500)))?;
    Ok(conn)
}

/// The master's port of one `CLUSTER SLOTS` entry (`[start, end, [ip, port, id], …]`) when it
/// holds `slot`.
/// The nodes' working folder (their `nodes.conf`): on a memory file system where there is one.
/// A node rewrites and fsyncs its `nodes.conf` on every change of the cluster's state — as when
/// a test kills a master — from its one event-loop thread, so a disk busy with the rest of the
/// suite (which creates and deletes files by the thousand) must not be where it does so.
fn node_folder() -> tempfile::TempDir {
    let memory = std::path::Path::new("/dev/shm");
    if memory.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("turnstile-cluster")
            .tempdir_in(memory)
        {
            return dir;
        }
    }
    tempfile::tempdir().expect("temporary folder")
}

fn master_of_range(range: &Value, slot: i64) -> Option<u16> {
    let Value::Array(fields) = range else {
        return None;
    };
    let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
        (fields.first(), fields.get(1), fields.get(2))
    else {
        return None;
    };
    if !(*start..=*end).contains(&slot) {
        return None;
    }
    match master.get(1) {
        Some(Value::Int(port)) => u16::try_from(*port).ok(),
        _ => None,
    }
}
