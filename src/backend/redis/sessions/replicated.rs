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

use deadpool::managed::{self, Metrics, Object, Pool, PoolError, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, Script, ServerErrorKind, Value};

use super::conn;
use super::errors::{redis_error, unavailable};
use super::options::{RedisOptions, ReplicaPolicy};

mod masters;

use masters::{Masters, PoolSettings};

/// Times at most an append or a replica check is sent again after an answer that says nothing
/// ran ([`NotRun`]), within the store's response timeout in all: a failover is a redirection
/// or two and a short wait, and a node that keeps answering so must not hold a turn longer.
const MAX_RESENDS: u32 = 6;

/// The first wait before sending again after a [`NotRun::Busy`]; each next one doubles, up to
/// [`MAX_BUSY_WAIT`] (the cluster connection's own retries wait 20 to 500 ms alike).
const FIRST_BUSY_WAIT: Duration = Duration::from_millis(20);
const MAX_BUSY_WAIT: Duration = Duration::from_millis(500);

use crate::key::SessionKey;
use crate::store::StoreError;

/// A pooled connection unused for this long is pinged before it is handed out: one that sat
/// idle may have been closed by a Redis restart or an idle timeout, while one in steady use
/// has just proved itself.
const IDLE_CHECK: Duration = Duration::from_secs(1);

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

/// Opens the pooled connections (with `append.lua` loaded on each, so that the pipelined
/// `EVALSHA` finds it).
struct Manager {
    client: redis::Client,
    config: AsyncConnectionConfig,
    append: Script,
}

impl managed::Manager for Manager {
    type Type = MultiplexedConnection;
    type Error = RedisError;

    async fn create(&self) -> Result<MultiplexedConnection, RedisError> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        self.append.load_async(&mut conn).await?;
        Ok(conn)
    }

    async fn recycle(
        &self,
        conn: &mut MultiplexedConnection,
        metrics: &Metrics,
    ) -> RecycleResult<RedisError> {
        if metrics.last_used() >= IDLE_CHECK {
            redis::cmd("PING").query_async::<()>(conn).await?;
        }
        Ok(())
    }
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

    /// An append `committed` short of replicas under `replica_policy=degrade`: acknowledged
    /// (`degraded`) when `ROLE` says its master has no replica online; otherwise the strict
    /// outcome stands — after waiting for the replicas as usual when only a millisecond was
    /// waited (`brief`: the master had none) and one is back. The append is still the
    /// connection's last write (`ROLE` writes nothing), so that `WAIT` counts it.
    async fn degraded(
        &self,
        conn: &mut MultiplexedConnection,
        master: &str,
        mut committed: Committed,
        brief: bool,
    ) -> Result<Committed, RedisError> {
        // The append has committed by now: a failure of what follows must not make its outcome
        // look unknown (or, worse, sent again), so it only keeps the strict outcome.
        let role = match redis::cmd("ROLE").query_async::<Value>(conn).await {
            Ok(role) => role,
            Err(error) => {
                tracing::warn!(
                    %error,
                    "redis store: ROLE was refused, so replica_policy=degrade cannot tell \
                     whether the primary has replicas (allow ROLE to turnstile's user)"
                );
                return Ok(committed);
            }
        };
        match online_replicas(&role) {
            Some(0) => {
                self.mark(master, true);
                metrics::counter!(DEGRADED_APPENDS).increment(1);
                committed.degraded = true;
            }
            Some(_) if brief => {
                self.mark(master, false);
                let mut wait = redis::cmd("WAIT");
                wait.arg(self.wanted).arg(self.timeout_ms);
                // A WAIT that fails counts no replica: `NotReplicated`, the append kept.
                committed.acked = wait.query_async(conn).await.unwrap_or(0);
            }
            // Replicas online but behind, or an answer not understood: doubt never
            // acknowledges.
            _ => {}
        }
        Ok(committed)
    }

    /// Whether `master` was last found with no replica online. Masters the map no longer names
    /// are forgotten on the way, so that the gauge falls back once a failed-over shard is whole
    /// again under another master.
    fn known_bare(&self, master: &str) -> bool {
        let mut without = self.without_replica.lock();
        if without.is_empty() || without.contains(master) {
            return !without.is_empty();
        }
        if let Connections::Cluster(masters) = &self.connections {
            let before = without.len();
            without.retain(|known| masters.names(known));
            if without.len() != before {
                metrics::gauge!(MASTERS_WITHOUT_REPLICA).set(without.len() as f64);
            }
        }
        false
    }

    /// Records whether `master` has no replica online, telling the operator when that changes.
    /// Masters the map no longer names (failed over, resharded away) are forgotten meanwhile,
    /// so that the gauge falls back once the shard is whole again elsewhere.
    fn mark(&self, master: &str, bare: bool) {
        let mut without = self.without_replica.lock();
        let changed = match bare {
            true => without.insert(master.to_owned()),
            false => without.remove(master),
        };
        if let Connections::Cluster(masters) = &self.connections {
            without.retain(|known| known == master || masters.names(known));
        }
        metrics::gauge!(MASTERS_WITHOUT_REPLICA).set(without.len() as f64);
        drop(without);
        let master = if master.is_empty() {
            "the primary"
        } else {
            master
        };
        match (changed, bare) {
            (true, true) => tracing::warn!(
                master,
                wanted = self.wanted,
                "redis store: this master has no replica online; replica_policy=degrade \
                 acknowledges its appends on the master alone until one is back \
                 ({DEGRADED_APPENDS})"
            ),
            (true, false) => tracing::info!(
                master,
                "redis store: a replica of this master is online again; its appends wait for \
                 replicas again"
            ),
            _ => {}
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

/// Appends (and retries' checks) acknowledged on a master with no replica online, under
/// `replica_policy=degrade`.
pub(crate) const DEGRADED_APPENDS: &str = "turnstile_redis_degraded_appends_total";

/// Masters this process last saw with no replica online, under `replica_policy=degrade`.
const MASTERS_WITHOUT_REPLICA: &str = "turnstile_redis_masters_without_replica";

/// How many replicas a `ROLE` reply lists, for a master (`["master", offset, [[ip, port,
/// offset], …]]`; Redis lists only replicas whose link is online); `None` for a replica's reply
/// or one not understood.
fn online_replicas(role: &Value) -> Option<usize> {
    let Value::Array(fields) = role else {
        return None;
    };
    let is_master = match fields.first()? {
        Value::BulkString(name) => name == b"master",
        Value::SimpleString(name) => name == "master",
        _ => false,
    };
    match (is_master, fields.get(2)?) {
        (true, Value::Array(replicas)) => Some(replicas.len()),
        _ => None,
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

/// An answer that says the node did not run what it was sent, so that sending it again runs it
/// once at most.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NotRun {
    /// `MOVED slot host:port`: the slot is another master's now (a failover or a resharding);
    /// the address it names, when the reply has one.
    Moved(Option<String>),
    /// `READONLY`: the node is a replica now (a failover demoted it); the map is asked again.
    Demoted,
    /// `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`: the cluster or the node is busy
    /// with a failover or a restart for a moment; it is waited for.
    Busy,
}

/// Whether `error` says nothing ran, and why. (An `ASK`, met only while a slot migrates, is not
/// followed: the append fails as unavailable and is sent again later.)
fn not_run(error: &RedisError) -> Option<NotRun> {
    let ErrorKind::Server(kind) = error.kind() else {
        return None;
    };
    match kind {
        ServerErrorKind::Moved => Some(NotRun::Moved(
            error.redirect_node().map(|(address, _)| address.to_owned()),
        )),
        ServerErrorKind::ReadOnly => Some(NotRun::Demoted),
        ServerErrorKind::TryAgain
        | ServerErrorKind::ClusterDown
        | ServerErrorKind::MasterDown
        | ServerErrorKind::BusyLoading => Some(NotRun::Busy),
        _ => None,
    }
}

/// The resends left to one append or check: a count and a time budget.
struct Resends {
    sent: u32,
    until: tokio::time::Instant,
}

impl Resends {
    fn new(budget: Duration) -> Self {
        Self {
            sent: 0,
            until: tokio::time::Instant::now() + budget,
        }
    }

    /// Takes one resend, with the wait before it should a busy node be the reason; `None` when
    /// they are used up (the count, or the time).
    fn next(&mut self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        if self.sent >= MAX_RESENDS || now >= self.until {
            return None;
        }
        let wait = FIRST_BUSY_WAIT
            .saturating_mul(1 << self.sent.min(8))
            .min(MAX_BUSY_WAIT)
            .min(self.until - now);
        self.sent += 1;
        Some(wait)
    }
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

    /// The error of a server's `-text` reply, as the connection reads it.
    fn server_error(text: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(Value::ServerError(e)) => RedisError::from(e),
            other => panic!("{text} read as {other:?}"),
        }
    }

    #[test]
    fn role_replies_tell_how_many_replicas_are_online() {
        let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let replica = |port: &str| Value::Array(vec![text("127.0.0.1"), text(port), text("3")]);
        let master = |replicas: Vec<Value>| {
            Value::Array(vec![text("master"), Value::Int(3), Value::Array(replicas)])
        };
        assert_eq!(online_replicas(&master(Vec::new())), Some(0));
        assert_eq!(
            online_replicas(&master(vec![replica("7001"), replica("7002")])),
            Some(2)
        );
        let slave = Value::Array(vec![
            text("slave"),
            text("127.0.0.1"),
            Value::Int(7000),
            text("connected"),
            Value::Int(3),
        ]);
        assert_eq!(online_replicas(&slave), None);
        assert_eq!(online_replicas(&text("master")), None);
        assert_eq!(online_replicas(&Value::Array(vec![text("master")])), None);
    }

    #[test]
    fn answers_that_say_nothing_ran_are_told_apart() {
        let cases = [
            (
                "MOVED 3999 127.0.0.1:6381",
                Some(NotRun::Moved(Some("127.0.0.1:6381".into()))),
            ),
            (
                "READONLY You can't write against a read only replica.",
                Some(NotRun::Demoted),
            ),
            (
                "TRYAGAIN Multiple keys request during rehashing of slot",
                Some(NotRun::Busy),
            ),
            ("CLUSTERDOWN The cluster is down", Some(NotRun::Busy)),
            ("MASTERDOWN Link with MASTER is down", Some(NotRun::Busy)),
            (
                "LOADING Redis is loading the dataset in memory",
                Some(NotRun::Busy),
            ),
            ("ASK 3999 127.0.0.1:6381", None),
            ("ERR unknown command", None),
            ("NOSCRIPT No matching script", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(not_run(&server_error(reply)), expected, "{reply}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn resends_are_bounded_by_count_and_by_time() {
        let mut resends = Resends::new(Duration::from_secs(60));
        let waits: Vec<Duration> = std::iter::from_fn(|| resends.next()).collect();
        assert_eq!(waits.len(), MAX_RESENDS as usize);
        assert_eq!(waits[0], FIRST_BUSY_WAIT);
        assert!(waits.iter().all(|w| *w <= MAX_BUSY_WAIT));
        let mut resends = Resends::new(Duration::from_millis(100));
        assert!(resends.next().is_some());
        tokio::time::advance(Duration::from_millis(90)).await;
        assert_eq!(
            resends.next(),
            Some(Duration::from_millis(10)),
            "the wait fits the budget"
        );
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(resends.next(), None);
    }

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
