//! `replica_policy=degrade`: an append short of replicas on a master with none online is
//! acknowledged on it alone, and the masters last found so are remembered (and shown).

use redis::aio::MultiplexedConnection;
use redis::{RedisError, Value};

use super::{Committed, Connections, Replicated};

/// Appends (and retries' checks) acknowledged on a master with no replica online, under
/// `replica_policy=degrade`.
pub(super) const DEGRADED_APPENDS: &str = "turnstile_redis_degraded_appends_total";

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

impl Replicated {
    /// An append `committed` short of replicas under `replica_policy=degrade`: acknowledged
    /// (`degraded`) when `ROLE` says its master has no replica online; otherwise the strict
    /// outcome stands — after waiting for the replicas as usual when only a millisecond was
    /// waited (`brief`: the master had none) and one is back. The append is still the
    /// connection's last write (`ROLE` writes nothing), so that `WAIT` counts it.
    pub(super) async fn degraded(
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
    pub(super) fn known_bare(&self, master: &str) -> bool {
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
    pub(super) fn mark(&self, master: &str, bare: bool) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
