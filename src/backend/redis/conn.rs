//! The one connection type the Redis store talks through: a standalone server's self-healing
//! multiplexed connection, or a Redis Cluster connection that routes each command by its key's
//! slot. Both are cheap to clone and shared by every clone of the store.
//!
//! A cluster URL is `redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]` (or
//! `rediss+cluster://…` for TLS): the nodes to discover the cluster from.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::errors::unavailable;
use super::options::RedisOptions;
use crate::key::SessionKey;
use crate::store::StoreError;

/// Schemes of a Redis Cluster URL, with the scheme each node is reached by.
const CLUSTER_SCHEMES: [(&str, &str); 2] = [
    ("redis+cluster://", "redis://"),
    ("rediss+cluster://", "rediss://"),
];

/// Whether `error` says the cluster client's own task is gone (it panicked): every command then
/// fails at once, which is no answer from any node. The `redis` crate says so only in the
/// message of a `BrokenPipe` error it makes itself.
fn driver_gone(error: &redis::RedisError) -> bool {
    let message = error.to_string();
    message.contains("redis_cluster: Unable to send command")
        || message.contains("redis_cluster: Unable to receive command")
}

/// Either kind of connection; implements [`ConnectionLike`] so the store's code is shared.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One server (or a proxy, or a Sentinel-managed primary), over several lanes.
    Single(Lanes),
    /// A Redis Cluster; a command (or a pipeline) must not cross slots.
    Cluster(ClusterLink),
}

mod healing;

/// A Redis Cluster connection shared by every clone of the store, replaced by a watchdog when
/// it stops answering (see `healing`).
#[derive(Clone)]
pub(crate) struct ClusterLink(Arc<healing::Healing<ClusterConnection>>);

impl ClusterLink {
    /// The connection the next command goes through.
    fn current(&self) -> ClusterConnection {
        self.0.current()
    }

    /// Sends `cmd` where `routing` says, through the current connection.
    pub(crate) async fn route_command(&self, cmd: Cmd, routing: RoutingInfo) -> RedisResult<Value> {
        self.current().route_command(cmd, routing).await
    }

    /// Links `conn`, made by `client`, and starts its watchdog: a ping at least once a second,
    /// the options' response timeout the longest it may go unanswered.
    fn watched(
        conn: ClusterConnection,
        client: redis::cluster::ClusterClient,
        options: &RedisOptions,
    ) -> Self {
        let healing = healing::Healing::new(conn);
        let watch = healing::Watch {
            every: options.response_timeout.min(Duration::from_secs(1)),
            limit: options.response_timeout,
            // The client connects to the URL's nodes, then to every node of the slot map: a
            // node that swallows connections costs a connect timeout in each step.
            connect: 2 * (options.connect_timeout + options.response_timeout),
        };
        let ping = |mut conn: ClusterConnection| async move {
            // To every master, answered by the first that answers: one slow or unreachable
            // node does not make the client look stuck.
            let routing = RoutingInfo::MultiNode((
                MultipleNodeRoutingInfo::AllMasters,
                Some(ResponsePolicy::OneSucceeded),
            ));
            match conn.route_command(redis::cmd("PING"), routing).await {
                Ok(_) => healing::Probe::Answered,
                Err(error) if error.is_timeout() || driver_gone(&error) => healing::Probe::Silent,
                Err(_) => healing::Probe::Failed,
            }
        };
        let connect = move || {
            let client = client.clone();
            async move { client.get_async_connection().await }
        };
        tokio::spawn(healing::watchdog(
            Arc::downgrade(&healing),
            watch,
            ping,
            connect,
        ));
        Self(healing)
    }
}

/// Connections to one server: an exchange about one session always takes that session's lane
/// ([`Connection::for_session`]); any other exchange (a listing, a batch of renewals) takes the
/// next lane in turn (every clone of the store's connection does). With a single multiplexed connection, many sessions' commands go
/// out in one batch, the server answers the whole batch, and the client then handles every
/// answer before the next batch leaves: the server and the client take turns instead of working
/// at once. Two lanes let one batch be served while the other's answers are handled
/// ([`RedisOptions::DEFAULT_LANES`]).
/// A session's commands all go over its own lane, so lanes never reorder them, even when one
/// timed out and is still on its way.
pub(crate) struct Lanes {
    /// Every lane, shared by all clones.
    all: Arc<[ConnectionManager]>,
    /// The lane the next clone takes.
    next: Arc<AtomicUsize>,
    /// This clone's lane.
    this: ConnectionManager,
}

impl Lanes {
    /// The same lanes, with lane `i` (taken modulo their number) as this clone's.
    fn at(&self, i: usize) -> Self {
        Self {
            all: Arc::clone(&self.all),
            next: Arc::clone(&self.next),
            this: self.all[i % self.all.len()].clone(),
        }
    }
}

impl Clone for Lanes {
    fn clone(&self) -> Self {
        self.at(self.next.fetch_add(1, Ordering::Relaxed))
    }
}

impl Connection {
    /// The connection for an exchange about one session: on a single server always the same
    /// lane for the same session. A command that timed out may still be on its way on its lane;
    /// the session's next command then queues behind it instead of overtaking it on another.
    pub(crate) fn for_session(&self, key: &SessionKey) -> Self {
        match self {
            Self::Single(lanes) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                key.hash(&mut hasher);
                let i = (hasher.finish() % lanes.all.len() as u64) as usize;
                Self::Single(lanes.at(i))
            }
            Self::Cluster(link) => Self::Cluster(link.clone()),
        }
    }
}

impl Connection {
    /// The cluster connection, on a Redis Cluster.
    pub(crate) fn cluster(&self) -> Option<ClusterLink> {
        match self {
            Self::Single(_) => None,
            Self::Cluster(link) => Some(link.clone()),
        }
    }

    /// One `PING`: on a single server over one lane; on a Cluster to every master, answered
    /// as soon as one of them answers (the process can serve the sessions of the masters it
    /// reaches, so one master down does not make it unready).
    pub(crate) async fn ping(&self) -> redis::RedisResult<()> {
        match self.clone() {
            Self::Single(mut lanes) => redis::cmd("PING").query_async(&mut lanes.this).await,
            Self::Cluster(link) => {
                let routing = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllMasters,
                    Some(ResponsePolicy::OneSucceeded),
                ));
                link.route_command(redis::cmd("PING"), routing)
                    .await
                    .map(drop)
            }
        }
    }
}

/// A connection to a Redis server or a Redis Cluster, as turnstile's Redis families hold it:
/// self-healing, bounded by the options' timeouts, cheap to clone (clones share it). Send it
/// commands with the `redis` crate ([`super::kit::redis`]): it implements [`ConnectionLike`]. On
/// a Cluster each command (and each script or pipeline) is routed by its keys' slot, so its keys
/// must share one hash tag.
#[derive(Clone)]
pub struct RedisConnection(Connection);

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConnection")
            .field("cluster", &self.is_cluster())
            .finish_non_exhaustive()
    }
}

impl RedisConnection {
    /// Whether this is a Redis Cluster connection (keys of one command must share a slot).
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Connection::Cluster(_))
    }
}

impl From<Connection> for RedisConnection {
    fn from(connection: Connection) -> Self {
        Self(connection)
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(lanes) => lanes.this.req_packed_command(cmd),
            Self::Cluster(link) => {
                let mut conn = link.current();
                Box::pin(async move { conn.req_packed_command(cmd).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(lanes) => lanes.this.req_packed_commands(pipeline, offset, count),
            Self::Cluster(link) => {
                let mut conn = link.current();
                Box::pin(async move { conn.req_packed_commands(pipeline, offset, count).await })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(lanes) => lanes.this.get_db(),
            Self::Cluster(link) => link.current().get_db(),
        }
    }
}

/// The node URLs of a cluster URL, or `None` when `url` names a single server.
pub(crate) fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    CLUSTER_SCHEMES.iter().find_map(|(scheme, node_scheme)| {
        let rest = url.strip_prefix(scheme)?;
        let (authority, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
            None => (String::new(), authority),
        };
        let tail = if tail.is_empty() {
            String::new()
        } else {
            format!("/{tail}")
        };
        Some(
            hosts
                .split(',')
                .map(|host| format!("{node_scheme}{credentials}{host}{tail}"))
                .collect(),
        )
    })
}

/// A cluster client for `nodes` with the store's timeouts (`response_timeout` for each answer).
/// Commands a node did not run — redirected (`MOVED`, `ASK`), refused while the cluster heals
/// (`TRYAGAIN`, `CLUSTERDOWN`), or never sent (connection refused) — are retried by the client,
/// with backoff, for about as long as a failover takes to be noticed and completed; the
/// store's own deadline bounds the whole.
pub(crate) fn cluster_client(
    nodes: Vec<String>,
    options: &RedisOptions,
    response_timeout: Duration,
) -> Result<redis::cluster::ClusterClient, StoreError> {
    let invalid = |e: &dyn std::fmt::Display| StoreError::InvalidRequest(format!("redis url: {e}"));
    if nodes
        .iter()
        .any(|n| n.ends_with("://") || n.contains("//,"))
    {
        return Err(invalid(&"a cluster URL names HOST:PORT[,HOST:PORT…]"));
    }
    ClusterClientBuilder::new(nodes)
        .connection_timeout(options.connect_timeout)
        .response_timeout(response_timeout)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(CLUSTER_MIN_RETRY_WAIT_MS)
        .max_retry_wait(CLUSTER_MAX_RETRY_WAIT_MS)
        .build()
        .map_err(|e| invalid(&e))
}

/// Attempts of a command the cluster did not run (see [`cluster_client`]): with jittered waits
/// from [`CLUSTER_MIN_RETRY_WAIT_MS`] growing to [`CLUSTER_MAX_RETRY_WAIT_MS`], about 1.5 s in
/// all (2.5 s at most) — a failover with a node timeout of a second or two completes within
/// them, and a redirection after it is followed rather than reported. (With Redis's default
/// node timeout of 15 s, the dead master's commands fail meanwhile.)
const CLUSTER_RETRIES: u32 = 10;

/// The first wait before retrying a command the cluster did not run, in milliseconds.
const CLUSTER_MIN_RETRY_WAIT_MS: u64 = 20;

/// The longest wait between two attempts, in milliseconds.
const CLUSTER_MAX_RETRY_WAIT_MS: u64 = 500;

/// Connects to `url` within the options' timeouts.
pub(crate) async fn connect(
    url: &str,
    options: &RedisOptions,
    deadline: Duration,
) -> Result<Connection, StoreError> {
    let invalid = |e: &dyn std::fmt::Display| StoreError::InvalidRequest(format!("redis url: {e}"));
    let connecting = async {
        match cluster_nodes(url) {
            Some(nodes) => {
                let client = cluster_client(nodes, options, options.response_timeout)?;
                let conn = client
                    .get_async_connection()
                    .await
                    .map_err(|e| unavailable(format!("connecting to the cluster: {e}")))?;
                Ok(Connection::Cluster(ClusterLink::watched(
                    conn, client, options,
                )))
            }
            None => {
                let client = redis::Client::open(url).map_err(|e| invalid(&e))?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(options.connect_timeout))
                    .set_response_timeout(Some(options.response_timeout))
                    // Few, quick retries: callers would rather hear `Unavailable` than wait.
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(200));
                let mut all = Vec::with_capacity(options.lanes);
                for _ in 0..options.lanes {
                    all.push(
                        ConnectionManager::new_with_config(client.clone(), config.clone())
                            .await
                            .map_err(|e| unavailable(format!("connecting: {e}")))?,
                    );
                }
                let all: Arc<[ConnectionManager]> = all.into();
                Ok(Connection::Single(Lanes {
                    this: all[0].clone(),
                    all,
                    next: Arc::new(AtomicUsize::new(1)),
                }))
            }
        }
    };
    tokio::time::timeout(deadline, connecting)
        .await
        .map_err(|_| unavailable(format!("no connection within {deadline:?}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_name_every_node_with_the_same_credentials() {
        assert_eq!(
            cluster_nodes("redis+cluster://u:p@h1:1,h2:2").unwrap(),
            ["redis://u:p@h1:1", "redis://u:p@h2:2"]
        );
        assert_eq!(
            cluster_nodes("rediss+cluster://h:7000/").unwrap(),
            ["rediss://h:7000"]
        );
        assert_eq!(cluster_nodes("redis://h:1"), None);
    }
}
