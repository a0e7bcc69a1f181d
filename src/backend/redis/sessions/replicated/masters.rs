//! On a Redis Cluster, the dedicated connections of replicated appends go to the master of each
//! session's slot: one small pool per master, found through a map of slots to masters.
//!
//! Why not a pool of cluster connections: a cluster connection reaches every node, so making
//! one while a node is down or stalled waits for that node, and appends to every master would
//! wait with it. A pool per master keeps one master's trouble (a replica that stalls and holds
//! `WAIT`s) to that master's sessions.
//!
//! The map comes from `CLUSTER SLOTS`, asked through the store's own cluster connection, and is
//! asked again when it names no master for a slot, when a node turned replica refuses an append
//! (`READONLY`), and when a master cannot be reached. A master that redirects an append
//! (`MOVED slot host:port`: a failover or a resharding moved the slot; nothing ran there) names
//! the slot's new master: that slot goes there at once, without asking for a map that a node
//! still catching up with the failover could answer stale, until the next map is read.

use std::collections::HashMap;
use std::time::Duration;

use crate::backend::redis::conn::ClusterLink;
use deadpool::managed::{Object, Pool, PoolError};
use parking_lot::{Mutex, RwLock};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{AsyncConnectionConfig, Script, Value};

use super::super::errors::{redis_error, unavailable};
use super::Manager;
use crate::store::StoreError;

/// How a pool of one master is built, and how long the map of masters may take to read.
#[derive(Debug, Clone, Copy)]
pub(super) struct PoolSettings {
    /// Dedicated connections per master at most (`replica_connections`).
    pub max_size: usize,
    /// How long an append waits for one of them to come free.
    pub wait: Duration,
    /// How long making one may take.
    pub create: Duration,
    /// How long checking an idle one may take.
    pub recycle: Duration,
    /// How long asking for the map of masters may take, all attempts together.
    pub refresh: Duration,
}

/// Nodes asked for the map of masters before giving up: a node picked at random may be the one
/// that is down.
const REFRESH_ATTEMPTS: usize = 3;

/// A contiguous range of slots and the address (`host:port`) of the master serving it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SlotRange {
    start: u16,
    end: u16,
    master: String,
}

/// The masters of a cluster and one pool of dedicated connections for each.
pub(super) struct Masters {
    /// The store's cluster connection, for `CLUSTER SLOTS` and `INFO` of every master.
    topology: ClusterLink,
    /// One node's URL from the store's URL: scheme, credentials and database for the others.
    node_url: String,
    /// How each dedicated connection is made (its timeouts).
    config: AsyncConnectionConfig,
    /// `append.lua`, loaded on each dedicated connection.
    append: Script,
    settings: PoolSettings,
    /// Sorted by `start`; empty until first asked.
    slots: RwLock<Vec<SlotRange>>,
    /// Slots a `MOVED` sent elsewhere since the map was read, and where: consulted before
    /// `slots`, cleared when a map is read. At most one entry per slot (16,384).
    moved: RwLock<HashMap<u16, String>>,
    /// One pool per master address; pools of addresses no longer in the map are dropped.
    pools: Mutex<HashMap<String, Pool<Manager>>>,
    /// Held while the map is asked for, so that many appends that find it stale ask once; the
    /// count of maps read so far tells a waiter whether another read one meanwhile.
    refreshing: tokio::sync::Mutex<u64>,
}

impl Masters {
    pub(super) fn new(
        topology: ClusterLink,
        node_url: String,
        config: AsyncConnectionConfig,
        append: Script,
        settings: PoolSettings,
    ) -> Self {
        Self {
            topology,
            node_url,
            config,
            append,
            settings,
            slots: RwLock::new(Vec::new()),
            moved: RwLock::new(HashMap::new()),
            pools: Mutex::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(0),
        }
    }

    /// A dedicated connection to the master of `slot`, asking for the map first if it names
    /// none; with the master's address.
    pub(super) async fn connection(
        &self,
        slot: u16,
    ) -> Result<(Object<Manager>, String), StoreError> {
        let master = match self.master_of(slot) {
            Some(master) => master,
            None => {
                let seen = *self.refreshing.lock().await;
                self.refresh(seen).await?;
                self.master_of(slot)
                    .ok_or_else(|| unavailable(format!("no master serves slot {slot}")))?
            }
        };
        let pool = self.pool(&master)?;
        match pool.get().await {
            Ok(conn) => Ok((conn, master)),
            Err(error) => {
                // A master that cannot be reached may have failed over: its slots are looked up
                // again next time; other masters' are left as they are.
                self.slots.write().retain(|range| range.master != master);
                self.moved.write().retain(|_, to| *to != master);
                Err(pool_error(&master, error))
            }
        }
    }

    /// The number of maps read so far; pass it to [`Masters::refresh`].
    pub(super) async fn generation(&self) -> u64 {
        *self.refreshing.lock().await
    }

    /// Asks the cluster which master serves which slots — unless another caller did since
    /// `seen` (a [`Masters::generation`]), whose map stands. Bounded by the settings' `refresh`
    /// time in all; a node that does not answer is passed over for another.
    pub(super) async fn refresh(&self, seen: u64) -> Result<(), StoreError> {
        let mut generation = self.refreshing.lock().await;
        if *generation != seen {
            return Ok(());
        }
        let asking = async {
            let mut last = None;
            for _ in 0..REFRESH_ATTEMPTS {
                let mut slots = redis::cmd("CLUSTER");
                slots.arg("SLOTS");
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
                match self.topology.route_command(slots, routing).await {
                    Ok(reply) => return Ok(reply),
                    Err(error) => last = Some(error),
                }
            }
            Err(last.map_or_else(
                || unavailable("CLUSTER SLOTS was not asked"),
                |e| redis_error("CLUSTER SLOTS", e),
            ))
        };
        let reply = tokio::time::timeout(self.settings.refresh, asking)
            .await
            .map_err(|_| {
                unavailable(format!(
                    "no node answered CLUSTER SLOTS within {:?}",
                    self.settings.refresh
                ))
            })??;
        let map = parse_slots(&reply)
            .ok_or_else(|| unavailable("CLUSTER SLOTS answered something else than a slot map"))?;
        self.pools
            .lock()
            .retain(|address, _| map.iter().any(|range| &range.master == address));
        *self.slots.write() = map;
        self.moved.write().clear();
        *generation += 1;
        Ok(())
    }

    /// A master answered `MOVED slot address`: `slot` is served at `address` (`host:port`, as
    /// Redis writes it, an IPv6 host unbracketed) from now until the next map. Returns false
    /// when the address cannot be used (no host, or no port): the map is then asked again.
    pub(super) fn moved(&self, slot: u16, address: &str) -> bool {
        let Some(master) = master_address(address) else {
            return false;
        };
        self.moved.write().insert(slot, master);
        true
    }

    /// `INFO replication` of every master, by node.
    pub(super) async fn replication_info(&self) -> Result<Vec<(String, String)>, StoreError> {
        use redis::cluster_routing::MultipleNodeRoutingInfo;
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let reply = self
            .topology
            .route_command(info, routing)
            .await
            .map_err(|e| redis_error("INFO replication", e))?;
        let Value::Map(nodes) = reply else {
            return Err(unavailable(
                "INFO replication to every master answered other than a map",
            ));
        };
        nodes
            .into_iter()
            .map(|(node, text)| {
                let unexpected = |e: redis::ParsingError| {
                    unavailable(format!(
                        "INFO replication answered an unreadable report: {e}"
                    ))
                };
                let node: String = redis::from_redis_value(node).map_err(unexpected)?;
                let text: String = redis::from_redis_value(text).map_err(unexpected)?;
                Ok((node, text))
            })
            .collect()
    }

    /// Whether the map (or a redirection since) names `master` as serving some slot.
    pub(super) fn names(&self, master: &str) -> bool {
        self.slots.read().iter().any(|range| range.master == master)
            || self.moved.read().values().any(|to| to == master)
    }

    fn master_of(&self, slot: u16) -> Option<String> {
        if let Some(master) = self.moved.read().get(&slot) {
            return Some(master.clone());
        }
        let slots = self.slots.read();
        let at = slots.partition_point(|range| range.end < slot);
        slots
            .get(at)
            .filter(|range| range.start <= slot)
            .map(|range| range.master.clone())
    }

    fn pool(&self, master: &str) -> Result<Pool<Manager>, StoreError> {
        if let Some(pool) = self.pools.lock().get(master) {
            return Ok(pool.clone());
        }
        let url = node_url(&self.node_url, master);
        let client = redis::Client::open(url.as_str())
            .map_err(|e| StoreError::InvalidRequest(format!("redis url of {master}: {e}")))?;
        let manager = Manager {
            client,
            config: self.config.clone(),
            append: self.append.clone(),
        };
        let s = self.settings;
        let pool = Pool::builder(manager)
            .max_size(s.max_size)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(s.wait))
            .create_timeout(Some(s.create))
            .recycle_timeout(Some(s.recycle))
            .build()
            .map_err(|e| StoreError::InvalidRequest(format!("redis replica pool: {e}")))?;
        Ok(self
            .pools
            .lock()
            .entry(master.to_owned())
            .or_insert(pool)
            .clone())
    }
}

/// A `MOVED` reply's `host:port` as this map writes a master's address (an IPv6 host in
/// brackets), or `None` when it names no host (`:port`, sent by a node that does not know the
/// name its peers reach it by) or no port.
fn master_address(address: &str) -> Option<String> {
    let (host, port) = address.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host {
        "" => None,
        host if host.contains(':') => Some(format!("[{host}]:{port}")),
        host => Some(format!("{host}:{port}")),
    }
}

fn pool_error(master: &str, error: PoolError<redis::RedisError>) -> StoreError {
    match error {
        PoolError::Backend(e) => unavailable(format!("connecting to master {master}: {e}")),
        PoolError::Timeout(_) => unavailable(format!(
            "no dedicated connection to master {master} came free in time (raise \
             replica_connections)"
        )),
        other => unavailable(format!("replica connection pool of {master}: {other}")),
    }
}

/// `template` (a node's URL: scheme, credentials, host, tail) with `host:port` in place of its
/// own host.
fn node_url(template: &str, address: &str) -> String {
    let (scheme, rest) = template.split_once("://").unwrap_or(("redis", template));
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let credentials = authority
        .rsplit_once('@')
        .map_or(String::new(), |(c, _)| format!("{c}@"));
    format!("{scheme}://{credentials}{address}{tail}")
}

/// The slot map of a `CLUSTER SLOTS` reply: `[start, end, [host, port, …], replicas…]` per
/// range. A master announced without a host is reached at the address the reply came from,
/// which this client cannot tell: such ranges are left out (the append then asks again).
fn parse_slots(reply: &Value) -> Option<Vec<SlotRange>> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut map = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            return None;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        let host: Option<String> = master
            .first()
            .and_then(|v| redis::from_redis_value(v.clone()).ok());
        let port = match master.get(1) {
            Some(Value::Int(port)) => *port,
            _ => return None,
        };
        let (Ok(start), Ok(end)) = (u16::try_from(*start), u16::try_from(*end)) else {
            return None;
        };
        match host.filter(|h| !h.is_empty()) {
            // An IPv6 address needs its brackets in a URL.
            Some(host) if host.contains(':') => map.push(SlotRange {
                start,
                end,
                master: format!("[{host}]:{port}"),
            }),
            Some(host) => map.push(SlotRange {
                start,
                end,
                master: format!("{host}:{port}"),
            }),
            None => {
                tracing::warn!(
                    start,
                    end,
                    "redis store: CLUSTER SLOTS names a master without an address for these \
                     slots; their replicated appends fail until it does"
                );
            }
        }
    }
    map.sort_by_key(|range| range.start);
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_slot_map_is_read_from_cluster_slots() {
        let node =
            |host: &str, port: i64| Value::Array(vec![text(host), Value::Int(port), text("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node("10.0.0.2", 7001),
                node("10.0.0.5", 7004),
            ]),
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![Value::Int(10923), Value::Int(16383), node("", 7002)]),
            Value::Array(vec![
                Value::Int(16000),
                Value::Int(16383),
                node("fd00::5", 7005),
            ]),
        ]);
        let map = parse_slots(&reply).expect("a map");
        assert_eq!(
            map,
            [
                SlotRange {
                    start: 0,
                    end: 5460,
                    master: "10.0.0.1:7000".into()
                },
                SlotRange {
                    start: 5461,
                    end: 10922,
                    master: "10.0.0.2:7001".into()
                },
                SlotRange {
                    start: 16000,
                    end: 16383,
                    master: "[fd00::5]:7005".into()
                },
            ],
            "sorted, IPv6 bracketed, and a master without a host left out"
        );
        assert!(parse_slots(&text("nonsense")).is_none());
    }

    #[test]
    fn a_moved_address_is_read_as_the_map_writes_masters() {
        assert_eq!(
            master_address("10.0.0.3:7001").as_deref(),
            Some("10.0.0.3:7001")
        );
        assert_eq!(
            master_address("fd00::5:7005").as_deref(),
            Some("[fd00::5]:7005")
        );
        assert_eq!(
            master_address("node-b.local:6379").as_deref(),
            Some("node-b.local:6379")
        );
        for unusable in [":7001", "10.0.0.3", "10.0.0.3:port", "10.0.0.3:99999", ""] {
            assert_eq!(master_address(unusable), None, "{unusable:?}");
        }
    }

    #[test]
    fn a_nodes_url_keeps_the_scheme_credentials_and_tail_of_the_template() {
        assert_eq!(
            node_url("rediss://u:p@h1:1/2?x=y", "10.0.0.9:7003"),
            "rediss://u:p@10.0.0.9:7003/2?x=y"
        );
        assert_eq!(node_url("redis://h1:1", "[::1]:7000"), "redis://[::1]:7000");
    }
}
