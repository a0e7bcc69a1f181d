//! Appends that wait for replicas (`replicas=N`): each commits, and waits with `WAIT`, on a
//! connection of its own — to the server, or on a Redis Cluster to the master of the session's
//! slot (`masters`).
//!
//! `WAIT n ms` counts the replicas that have caught up with the last write *of the connection
//! it is sent on*, and blocks that connection until they have or the time is up. On the store's
//! shared multiplexed connection it would hold up every load and read queued behind it for as
//! long as a replica lags. So a replicated append takes a connection from a small bounded pool,
//! sends `EVALSHA append.lua …` and `WAIT` pipelined (one round trip), and gives the connection
//! back. Loads, reads, leases and the writes after the commit stay on the shared connection.
//!
//! The pool is deadpool (already in the build for the PostgreSQL store: bounded size, wait and
//! create timeouts) with a manager of our own. redis 1.x has no non-multiplexed async
//! connection, so each pooled connection is a `MultiplexedConnection` used by one append at a
//! time: to the server, one client whose last write is that append's. deadpool-redis 0.23 does
//! the same but sends `UNWATCH` + `PING` on every checkout, a second round trip per append;
//! this manager pings only a connection idle for [`IDLE_CHECK`] (one that may have died with a
//! Redis restart), and a connection whose exchange failed or ran out of time is dropped, never
//! handed out again (its `WAIT` may still block it).

use std::collections::HashSet;
use std::time::Duration;

use deadpool::managed::{Object, Pool, PoolError};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, Script, ServerErrorKind, Value};

use super::conn;
use super::errors::{redis_error, unavailable};
use super::options::{RedisOptions, ReplicaPolicy};

mod degrade;
mod manager;
mod masters;
mod resend;

use manager::Manager;
use masters::{Masters, PoolSettings};
use resend::{not_run, NotRun, Resends};

use crate::key::SessionKey;
use crate::store::StoreError;

/// The append script's reply and how many replicas confirmed the write.
pub(super) struct Committed {
    /// `append.lua`'s reply.
    pub(super) reply: Vec<Option<String>>,
    /// Replicas that confirmed the connection's last write within the timeout.
    pub(super) acked: u32,
    /// Acknowledged short of replicas because its master has none online
    /// (`replica_policy=degrade`).
    pub(super) degraded: bool,
}

/// Dedicated connections for appends that wait for replicas, and what they wait for.
pub(super) struct Replicated {
    /// At most `replica_connections` connections (per master on a Cluster); one append on each
    /// at a time.
    connections: Connections,
    /// Replicas each append waits for (at least 1).
    pub(super) wanted: u32,
    /// How long it waits for them.
    pub(super) timeout: Duration,
    /// `timeout` in whole milliseconds, as `WAIT` takes it.
    timeout_ms: u64,
    /// Bound on one exchange: the commit's answer plus the wait for replicas.
    exchange_deadline: Duration,
    /// How long an append or a check may go on sending again after answers that say nothing
    /// ran (the store's response timeout).
    resend_budget: Duration,
    /// What an append short of replicas answers when its master has none online.
    policy: ReplicaPolicy,
    /// Masters (`host:port`; empty for a single server) last seen with no replica online, under
    /// `replica_policy=degrade`: their appends wait a millisecond for replicas, not the
    /// timeout, and ask `ROLE` whether one is back. At most one entry per master.
    without_replica: parking_lot::Mutex<HashSet<String>>,
}

/// Where the dedicated connections lead.
enum Connections {
    /// One server: one pool.
    Single(Pool<Manager>),
    /// A Redis Cluster: one pool per master, found by the session's slot.
    Cluster(Box<Masters>),
}

impl Replicated {
    /// The dedicated connections for `url` (a single server's, or a cluster's, whose masters
    /// are found through the store's own `topology` connection), or `None` when `options` wait
    /// for no replica. Connects nothing yet.
    pub(super) fn new(
        url: &str,
        options: &RedisOptions,
        append: Script,
        topology: Option<crate::backend::redis::conn::ClusterLink>,
    ) -> Result<Option<Self>, StoreError> {
        if options.replicas == 0 {
            return Ok(None);
        }
        let timeout = options.replica_timeout;
        let exchange_deadline = options.response_timeout + timeout;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(exchange_deadline));
        let settings = PoolSettings {
            max_size: options.replica_connections,
            wait: options.response_timeout,
            create: options.connect_timeout,
            recycle: options.response_timeout,
            refresh: options.response_timeout,
        };
        let connections = match (conn::cluster_nodes(url), topology) {
            (Some(nodes), Some(topology)) => {
                let first = nodes.into_iter().next().unwrap_or_default();
                let masters = Masters::new(topology, first, config, append, settings);
                Connections::Cluster(Box::new(masters))
            }
            _ => {
                let client = redis::Client::open(url)
                    .map_err(|e| StoreError::InvalidRequest(format!("redis url: {e}")))?;
                let manager = Manager {
                    client,
                    config,
                    append,
                };
                let pool = Pool::builder(manager)
                    .max_size(settings.max_size)
                    .runtime(deadpool::Runtime::Tokio1)
                    .wait_timeout(Some(settings.wait))
                    .create_timeout(Some(settings.create))
                    .recycle_timeout(Some(settings.recycle))
                    .build()
                    .map_err(|e| StoreError::InvalidRequest(format!("redis replica pool: {e}")))?;
                Connections::Single(pool)
            }
        };
        Ok(Some(Self {
            connections,
            wanted: options.replicas,
            timeout,
            timeout_ms: options.replica_timeout_ms(),
            exchange_deadline,
            resend_budget: options.response_timeout,
            policy: options.replica_policy,
            without_replica: parking_lot::Mutex::new(HashSet::new()),
        }))
    }

    /// Connects once and reads how many replicas the primary has (on a Cluster, each master),
    /// warning when fewer than wanted are connected (every append would then answer
    /// `NotReplicated`). A single server that is itself a replica is refused: it cannot take
    /// writes, and `WAIT` fails there.
    pub(super) async fn check_primary(&self) -> Result<(), StoreError> {
        let reports = match &self.connections {
            Connections::Single(_) => {
                let (mut conn, _) = self.connection(0).await?;
                let mut info = redis::cmd("INFO");
                info.arg("replication");
                let info = info.query_async::<String>(&mut *conn);
                let info = tokio::time::timeout(self.exchange_deadline, info)
                    .await
                    .map_err(|_| unavailable("no answer to INFO replication"))?
                    .map_err(|e| redis_error("INFO replication", e))?;
                vec![("the server".to_owned(), info)]
            }
            Connections::Cluster(masters) => {
                tokio::time::timeout(self.exchange_deadline, masters.replication_info())
                    .await
                    .map_err(|_| unavailable("no answer to INFO replication"))??
            }
        };
        for (node, info) in reports {
            let field = |name: &str| {
                info.lines()
                    .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                    .map(str::trim)
            };
            if field("role") == Some("slave") {
                return Err(StoreError::InvalidRequest(
                    "redis replicas=N needs the primary's URL, and this server is a replica".into(),
                ));
            }
            let connected: u32 = field("connected_slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if connected < self.wanted {
                tracing::warn!(
                    node,
                    connected,
                    wanted = self.wanted,
                    policy = ?self.policy,
                    "redis store: fewer replicas are connected than each append waits for; \
                     appends will answer not_replicated until they are (with \
                     replica_policy=degrade, a node with none at all takes them on its own)"
                );
            }
        }
        Ok(())
    }

    /// Commits `call` (an `EVALSHA` of `append.lua`, whose keys are in `slot`) and waits for
    /// the replicas, in one round trip on a dedicated connection. An error means the outcome is
    /// unknown (the script may have committed), except that `NOSCRIPT` is retried once after
    /// loading the script, and a redirection (nothing ran) after asking where the slot is.
    pub(super) async fn commit(
        &self,
        key: &SessionKey,
        slot: u16,
        append: &Script,
        call: Cmd,
    ) -> Result<Committed, StoreError> {
        let degrade = self.policy == ReplicaPolicy::Degrade;
        // A master known to have no replica is not waited for: a millisecond tells whether one
        // is back (see `degraded`).
        let brief = degrade.then(|| self.with_wait(call.clone(), 1));
        let pipe = self.with_wait(call, self.timeout_ms);
        let mut resends = Resends::new(self.resend_budget);
        loop {
            let (mut conn, master) = self.connection(slot).await?;
            // Read after the connection was found: finding it may itself have read a map.
            let seen = self.generation().await;
            let known_bare = degrade && self.known_bare(&master);
            let pipe = match &brief {
                Some(brief) if known_bare => brief,
                _ => &pipe,
            };
            let exchange = async {
                let committed = self.exchange(&mut conn, append, pipe).await?;
                match degrade && committed.acked < self.wanted {
                    true => {
                        self.degraded(&mut conn, &master, committed, known_bare)
                            .await
                    }
                    false => {
                        if known_bare {
                            self.mark(&master, false);
                        }
                        Ok(committed)
                    }
                }
            };
            let answer = tokio::time::timeout(self.exchange_deadline, exchange).await;
            if self.send_again(&answer, slot, seen, &mut resends).await? {
                continue;
            }
            return self.settle(key, conn, answer, "an append and its WAIT");
        }
    }

    /// Whether to send again after `answer`: it said nothing ran ([`NotRun`]), and the
    /// resends are not used up. A `MOVED` sends the slot to the master it names, a `READONLY`
    /// asks for the map again, a busy cluster is waited for.
    async fn send_again<T>(
        &self,
        answer: &Result<Result<T, RedisError>, tokio::time::error::Elapsed>,
        slot: u16,
        seen: u64,
        resends: &mut Resends,
    ) -> Result<bool, StoreError> {
        let Ok(Err(error)) = answer else {
            return Ok(false);
        };
        let Some(why) = not_run(error) else {
            return Ok(false);
        };
        let Some(wait) = resends.next() else {
            tracing::warn!(
                slot,
                %error,
                resends = resends.sent,
                "redis store: a replicated write was still not run after its resends"
            );
            return Ok(false);
        };
        match (why, &self.connections) {
            (NotRun::Moved(address), Connections::Cluster(masters)) => {
                let followed = address.is_some_and(|to| masters.moved(slot, &to));
                if !followed {
                    masters.refresh(seen).await?;
                }
            }
            (NotRun::Demoted, Connections::Cluster(masters)) => masters.refresh(seen).await?,
            (NotRun::Busy, _) => tokio::time::sleep(wait).await,
            // A single server that redirects or turned replica: nothing to follow.
            (NotRun::Moved(_) | NotRun::Demoted, Connections::Single(_)) => return Ok(false),
        }
        Ok(true)
    }

    /// How many maps of masters were read so far (0 on a single server).
    async fn generation(&self) -> u64 {
        match &self.connections {
            Connections::Cluster(masters) => masters.generation().await,
            Connections::Single(_) => 0,
        }
    }

    /// Reads the session's stored version (`HGET` of its head's `v`), then writes `marker` (a
    /// write of nothing that matters, in the session's slot) and sends `WAIT`, in one round trip
    /// on a dedicated connection. Answers the version read and how many replicas hold every
    /// write made before the marker: `WAIT` counts the replicas that caught up with the last
    /// write of its own connection, and replicas apply the primary's writes in order, so the
    /// marker stands for the session's earlier appends, whichever connection made them.
    pub(super) async fn confirm(
        &self,
        key: &SessionKey,
        slot: u16,
        version: Cmd,
        marker: Cmd,
    ) -> Result<(Option<String>, u32, bool), StoreError> {
        let mut pipe = redis::pipe();
        pipe.add_command(version)
            .add_command(marker)
            .cmd("WAIT")
            .arg(self.wanted)
            .arg(self.timeout_ms)
            // Each reply is judged below, so that a redirection's address is read.
            .ignore_errors();
        let mut resends = Resends::new(self.resend_budget);
        loop {
            let (mut conn, master) = self.connection(slot).await?;
            let seen = self.generation().await;
            let exchange = async {
                let (version, acked) = check_exchange(&mut conn, &pipe).await?;
                if self.policy != ReplicaPolicy::Degrade || acked >= self.wanted {
                    return Ok((version, acked, false));
                }
                let committed = Committed {
                    reply: Vec::new(),
                    acked,
                    degraded: false,
                };
                let checked = self.degraded(&mut conn, &master, committed, false).await?;
                Ok((version, checked.acked, checked.degraded))
            };
            let answer = tokio::time::timeout(self.exchange_deadline, exchange).await;
            if self.send_again(&answer, slot, seen, &mut resends).await? {
                continue;
            }
            return self.settle(key, conn, answer, "a replica check");
        }
    }

    /// The outcome of one exchange on `conn` (`what`, for the message), bounded by the exchange
    /// deadline. A connection whose exchange failed or ran out of time is dropped rather than
    /// handed out again: its state is unknown, and its `WAIT` may still block it.
    fn settle<T>(
        &self,
        key: &SessionKey,
        conn: Object<Manager>,
        answer: Result<Result<T, RedisError>, tokio::time::error::Elapsed>,
        what: &str,
    ) -> Result<T, StoreError> {
        let failed = match answer {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(e)) => redis_error(&key.to_string(), e),
            Err(_) => unavailable(format!(
                "no answer to {what} within {:?}",
                self.exchange_deadline
            )),
        };
        drop(Object::take(conn));
        Err(failed)
    }

    /// A dedicated connection: to the server, or to the master of `slot`; with the master's
    /// address (empty for a single server).
    async fn connection(&self, slot: u16) -> Result<(Object<Manager>, String), StoreError> {
        let pool = match &self.connections {
            Connections::Single(pool) => pool,
            Connections::Cluster(masters) => return masters.connection(slot).await,
        };
        let conn = pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => unavailable(format!("connecting for a replicated write: {e}")),
            PoolError::Timeout(_) => unavailable(
                "no dedicated connection for a replicated write came free in time (raise \
                 replica_connections)",
            ),
            other => unavailable(format!("replica connection pool: {other}")),
        })?;
        Ok((conn, String::new()))
    }

    /// `call` followed by `WAIT` of up to `timeout_ms`, as one pipeline.
    fn with_wait(&self, call: Cmd, timeout_ms: u64) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.add_command(call)
            .cmd("WAIT")
            .arg(self.wanted)
            .arg(timeout_ms)
            // Each reply is judged below: an error of the script must not hide the count.
            .ignore_errors();
        pipe
    }

    async fn exchange(
        &self,
        conn: &mut MultiplexedConnection,
        append: &Script,
        pipe: &redis::Pipeline,
    ) -> Result<Committed, RedisError> {
        let mut replies: Vec<Value> = pipe.query_async(conn).await?;
        if let Some(Value::ServerError(e)) = replies.first() {
            let error = RedisError::from(e.clone());
            if matches!(e.kind(), Some(ServerErrorKind::Ask)) || not_run(&error).is_some() {
                // Another master serves the slot now, or the node could not take it: nothing
                // ran here.
                return Err(error);
            }
        }
        if replies.first().is_some_and(is_noscript) {
            // The script cache was flushed since this connection loaded it; nothing was
            // written, so running the pair again is safe.
            append.load_async(conn).await?;
            replies = pipe.query_async(conn).await?;
        }
        let [reply, acked] = <[Value; 2]>::try_from(replies).map_err(|_| {
            RedisError::from((
                ErrorKind::UnexpectedReturnType,
                "an append and its WAIT answered other than two replies",
            ))
        })?;
        let reply: Vec<Option<String>> = redis::from_redis_value(reply.extract_error()?)?;
        let acked = match acked {
            Value::Int(n) => u32::try_from(n.max(0)).unwrap_or(u32::MAX),
            other => {
                // The script's outcome stands; only the count is unknown, so it counts as none.
                tracing::warn!(reply = ?other, "redis store: WAIT did not answer a count");
                0
            }
        };
        Ok(Committed {
            reply,
            acked,
            degraded: false,
        })
    }
}

/// The replica check's exchange: the session's version and the count of replicas that confirmed
/// the marker. An error reply of any of the three is the exchange's error (its own, so that a
/// redirection's address can be read).
async fn check_exchange(
    conn: &mut MultiplexedConnection,
    pipe: &redis::Pipeline,
) -> Result<(Option<String>, u32), RedisError> {
    let replies: Vec<Value> = pipe.query_async(conn).await?;
    if let Some(Value::ServerError(e)) = replies.iter().find(|v| matches!(v, Value::ServerError(_)))
    {
        return Err(RedisError::from(e.clone()));
    }
    let [version, _marker, acked] = <[Value; 3]>::try_from(replies).map_err(|_| {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "a replica check answered other than three replies",
        ))
    })?;
    Ok((
        redis::from_redis_value(version)?,
        redis::from_redis_value(acked)?,
    ))
}

fn is_noscript(value: &Value) -> bool {
    match value {
        Value::ServerError(e) => e.kind() == Some(ServerErrorKind::NoScript),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pool_is_made_when_no_replica_is_wanted() {
        let options = RedisOptions::default();
        let new = |url: &str, options: &RedisOptions| {
            Replicated::new(url, options, Script::new("return 1"), None)
        };
        assert!(new("redis://127.0.0.1:1/", &options).unwrap().is_none());
        let options = options.with_replicas(1);
        assert_eq!(
            new("redis://127.0.0.1:1/", &options)
                .unwrap()
                .unwrap()
                .wanted,
            1
        );
        assert!(new("nonsense://", &options).is_err());
    }
}
