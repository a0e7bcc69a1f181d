//! Appends that wait for replicas (`replicas=N`): each commits, and waits with `WAIT`, on a
//! connection of its own.
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

use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, Pool, PoolError, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, Script, ServerErrorKind, Value};

use super::codec::{redis_error, unavailable};
use super::options::RedisOptions;
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
}

/// Dedicated connections for appends that wait for replicas, and what they wait for.
pub(super) struct Replicated {
    /// At most `replica_connections` connections; one append on each at a time.
    pool: Pool<Manager>,
    /// Replicas each append waits for (at least 1).
    pub(super) wanted: u32,
    /// How long it waits for them.
    pub(super) timeout: Duration,
    /// `timeout` in whole milliseconds, as `WAIT` takes it.
    timeout_ms: u64,
    /// Bound on one exchange: the commit's answer plus the wait for replicas.
    exchange_deadline: Duration,
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
    /// The pool for `url` (a single server's), or `None` when `options` wait for no replica.
    /// Connects nothing yet.
    pub(super) fn new(
        url: &str,
        options: &RedisOptions,
        append: Script,
    ) -> Result<Option<Self>, StoreError> {
        if options.replicas == 0 {
            return Ok(None);
        }
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::InvalidRequest(format!("redis url: {e}")))?;
        let timeout = options.replica_timeout;
        let exchange_deadline = options.response_timeout + timeout;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(exchange_deadline));
        let manager = Manager {
            client,
            config,
            append,
        };
        let pool = Pool::builder(manager)
            .max_size(options.replica_connections)
            .runtime(deadpool::Runtime::Tokio1)
            .wait_timeout(Some(options.response_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.response_timeout))
            .build()
            .map_err(|e| StoreError::InvalidRequest(format!("redis replica pool: {e}")))?;
        Ok(Some(Self {
            pool,
            wanted: options.replicas,
            timeout,
            timeout_ms: options.replica_timeout_ms(),
            exchange_deadline,
        }))
    }

    /// Connects once and reads how many replicas the primary has, warning when fewer than
    /// wanted are connected (every append would then answer `NotReplicated`). A server that is
    /// itself a replica is refused: it cannot take writes, and `WAIT` fails there.
    pub(super) async fn check_primary(&self) -> Result<(), StoreError> {
        let mut conn = self.connection().await?;
        let info = tokio::time::timeout(
            self.exchange_deadline,
            redis::cmd("INFO")
                .arg("replication")
                .query_async::<String>(&mut *conn),
        )
        .await
        .map_err(|_| unavailable("no answer to INFO replication"))?
        .map_err(|e| redis_error("INFO replication", e))?;
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
                connected,
                wanted = self.wanted,
                "redis store: fewer replicas are connected than each append waits for; appends \
                 will answer not_replicated until they are"
            );
        }
        Ok(())
    }

    /// Commits `call` (an `EVALSHA` of `append.lua`) and waits for the replicas, in one round
    /// trip on a dedicated connection. An error means the outcome is unknown (the script may
    /// have committed), except that `NOSCRIPT` is retried once after loading the script.
    pub(super) async fn commit(
        &self,
        key: &SessionKey,
        append: &Script,
        call: Cmd,
    ) -> Result<Committed, StoreError> {
        let mut conn = self.connection().await?;
        let exchange = self.exchange(&mut conn, append, call);
        let answer = tokio::time::timeout(self.exchange_deadline, exchange).await;
        self.settle(key, conn, answer, "an append and its WAIT")
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
        version: Cmd,
        marker: Cmd,
    ) -> Result<(Option<String>, u32), StoreError> {
        let mut conn = self.connection().await?;
        let mut pipe = redis::pipe();
        pipe.add_command(version)
            .add_command(marker)
            .ignore()
            .cmd("WAIT")
            .arg(self.wanted)
            .arg(self.timeout_ms);
        let exchange = pipe.query_async::<(Option<String>, u32)>(&mut *conn);
        let answer = tokio::time::timeout(self.exchange_deadline, exchange).await;
        self.settle(key, conn, answer, "a replica check")
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

    async fn connection(&self) -> Result<Object<Manager>, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => unavailable(format!("connecting for a replicated write: {e}")),
            PoolError::Timeout(_) => unavailable(
                "no dedicated connection for a replicated write came free in time (raise \
                 replica_connections)",
            ),
            other => unavailable(format!("replica connection pool: {other}")),
        })
    }

    async fn exchange(
        &self,
        conn: &mut MultiplexedConnection,
        append: &Script,
        call: Cmd,
    ) -> Result<Committed, RedisError> {
        let mut pipe = redis::pipe();
        pipe.add_command(call)
            .cmd("WAIT")
            .arg(self.wanted)
            .arg(self.timeout_ms)
            // Each reply is judged below: an error of the script must not hide the count.
            .ignore_errors();
        let mut replies: Vec<Value> = pipe.query_async(conn).await?;
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
        Ok(Committed { reply, acked })
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

    #[test]
    fn no_pool_is_made_when_no_replica_is_wanted() {
        let options = RedisOptions::default();
        let pool = Replicated::new("redis://127.0.0.1:1/", &options, Script::new("return 1"));
        assert!(pool.unwrap().is_none());
        let options = options.with_replicas(1);
        let pool = Replicated::new("redis://127.0.0.1:1/", &options, Script::new("return 1"));
        assert_eq!(pool.unwrap().unwrap().wanted, 1);
        assert!(Replicated::new("nonsense://", &options, Script::new("return 1")).is_err());
    }
}
