//! The pool manager of the dedicated connections: each opened with `append.lua` loaded, and
//! pinged before reuse only after sitting idle.

use std::time::Duration;

use deadpool::managed::{self, Metrics, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, Script};

/// A pooled connection unused for this long is pinged before it is handed out: one that sat
/// idle may have been closed by a Redis restart or an idle timeout, while one in steady use
/// has just proved itself.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Opens the pooled connections (with `append.lua` loaded on each, so that the pipelined
/// `EVALSHA` finds it).
pub(super) struct Manager {
    pub(super) client: redis::Client,
    pub(super) config: AsyncConnectionConfig,
    pub(super) append: Script,
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
