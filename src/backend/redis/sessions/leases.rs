//! Session leases in Redis: one hash per session in the session's own slot (token, owner's
//! address and instance, epoch; expiring), and an epoch counter beside it that only grows.
//! Fenced appends check the lease inside `append.lua` (see `super::append`), through the
//! head's mirror of the newest grant's token where it can.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;

use redis::{from_redis_value, Value};

use super::codec::corrupt;
use super::{read_back, ReadSession, RedisStore};
use crate::key::SessionKey;
use crate::store::{Claim, Claimant, Lease, Leases, LoadedSession, Owner, Renewal, StoreError};

/// A renewal is waited for at most two fifths of the TTL. A lease's local deadline is four
/// fifths of the TTL after the request that last renewed it, and renewals run every third of
/// it (sooner after an unanswered batch, never later), so when a batch starts every held lease
/// has at least 4/5 − 1/3 ≈ 0.47 of the TTL left: an unanswered node holding the batch for 2/5
/// never makes another node's renewed lease lapse, while a large batch (a hundred thousand
/// leases pipelined) has time to be answered.
const RENEWAL_WAIT: (u32, u32) = (2, 5);

/// A TTL in whole milliseconds, at least 1 (Redis refuses `PEXPIRE 0` as "expire now").
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Reads an owner from a lease hash's address, instance and epoch; `None` if there is none.
pub(super) fn owner_from(
    key: &SessionKey,
    address: Option<String>,
    instance: Option<String>,
    epoch: Option<String>,
) -> Result<Option<Owner>, StoreError> {
    match (address, instance, epoch) {
        (None, None, None) => Ok(None),
        (Some(address), Some(instance), Some(epoch)) => {
            let epoch = epoch
                .parse()
                .map_err(|_| corrupt(key, format!("lease epoch {epoch:?} is not a number")))?;
            Ok(Some(Owner {
                address,
                instance,
                epoch,
            }))
        }
        _ => Err(corrupt(key, "the lease lacks some of its fields")),
    }
}

impl RedisStore {
    /// Whether `lease` is `key`'s current lease.
    pub(super) async fn holds(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let cmd = redis::cmd("HMGET")
            .arg(self.session_keys(key).lease)
            .arg(&["t", "ep"][..])
            .to_owned();
        let mut conn = self.conn.for_session(key);
        let (token, epoch): (Option<String>, Option<String>) =
            self.run(key, cmd.query_async(&mut conn)).await?;
        Ok(token.as_deref() == Some(lease.token.as_str())
            && epoch.as_deref() == Some(lease.epoch.to_string().as_str()))
    }

    /// Who holds `key`'s lease now, if anyone: one `HMGET`.
    pub(super) async fn owner_of(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        let cmd = redis::cmd("HMGET")
            .arg(self.session_keys(key).lease)
            .arg(&["a", "i", "ep"][..])
            .to_owned();
        let mut conn = self.conn.for_session(key);
        let (address, instance, epoch): (Option<String>, Option<String>, Option<String>) =
            self.run(key, cmd.query_async(&mut conn)).await?;
        owner_from(key, address, instance, epoch)
    }
    /// Runs `claim.lua`: takes `key`'s lease for `me` and, with `window`, reads the session in
    /// the same step (answered only when the lease is granted, with what reading it found: a
    /// session that cannot be read does not undo the grant).
    async fn claim(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: Option<usize>,
    ) -> Result<(Claim, Option<Result<ReadSession, StoreError>>), StoreError> {
        let names = self.session_keys(key);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut call = self.scripts.claim.prepare_invoke();
        call.key(&names.lease)
            .key(&names.epoch)
            .key(&names.head)
            .key(&names.log)
            .arg(&token)
            .arg(&me.address)
            .arg(&me.instance)
            .arg(ttl_ms(ttl));
        // Lua numbers are doubles: a count past any real log, kept exact as a Lua integer.
        match window {
            Some(window) => call.arg(window.min(1 << 40)),
            None => call.arg(""),
        };
        let mut conn = self.conn.for_session(key);
        let reply: Vec<Value> = match self.run(key, call.invoke_async(&mut conn)).await {
            Ok(reply) => reply,
            Err(error) => {
                // The script may have run with its answer lost (a timeout): a grant nobody
                // holds is given back, on the session's lane and so after the claim. The token
                // names this claim's grant alone; the epoch plays no part in a release.
                let lease = Lease { token, epoch: 0 };
                let _ = Leases::release(self, key, &lease).await;
                return Err(error);
            }
        };
        let mut reply = reply.into_iter();
        let unexpected = || corrupt(key, "unexpected reply to a lease claim");
        let mut field = || -> Result<Option<String>, StoreError> {
            match reply.next() {
                None | Some(Value::Nil) => Ok(None),
                Some(value) => from_redis_value(value).map_err(|_| unexpected()),
            }
        };
        match field()?.as_deref() {
            Some("1") => {
                let epoch = field()?.unwrap_or_default();
                let epoch = epoch
                    .parse()
                    .map_err(|_| corrupt(key, format!("lease epoch {epoch:?} is not a number")))?;
                let granted = Claim::Granted(Lease { token, epoch });
                let Some(window) = window else {
                    return Ok((granted, None));
                };
                // Granted: from here on nothing fails the claim (see `acquire_and_load`).
                let read = match (reply.next(), reply.next()) {
                    (Some(fields), Some(raw)) => {
                        match (from_redis_value(fields), from_redis_value(raw)) {
                            (Ok(fields), Ok(raw)) => read_back(key, window, fields, raw),
                            _ => Err(unexpected()),
                        }
                    }
                    _ => Err(unexpected()),
                };
                Ok((granted, Some(read)))
            }
            Some("0") => {
                let (address, instance, epoch) = (field()?, field()?, field()?);
                let owner = owner_from(key, address, instance, epoch)?
                    .ok_or_else(|| corrupt(key, "a held lease has no owner"))?;
                Ok((Claim::Held(owner), None))
            }
            _ => Err(unexpected()),
        }
    }
}

#[async_trait]
impl Leases for RedisStore {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        Ok(self.claim(key, me, ttl, None).await?.0)
    }

    async fn acquire_and_load(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: usize,
    ) -> Result<(Claim, Option<LoadedSession>), StoreError> {
        let (claim, read) = self.claim(key, me, ttl, Some(window)).await?;
        let Some(read) = read else {
            return Ok((claim, None));
        };
        // The lease is granted: a read that failed (a corrupt or newer head, shared state that
        // could not be read) must not fail the claim, or nobody would hold, renew or release
        // the lease. The caller loads the session itself then, and meets the error on the path
        // that deals with unloadable sessions (a delete still removes them).
        match self.loaded(key, window, async { read }).await {
            Ok(loaded) => Ok((claim, Some(loaded))),
            Err(error) => {
                tracing::debug!(%key, %error, "redis store: claimed, but the session read with the claim failed; the caller loads it");
                Ok((claim, None))
            }
        }
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        // All sent at once: each connection pipelines them (one exchange per Redis node), and
        // on a Cluster each goes to its own session's slot. Each is answered on its own: a node
        // that is down leaves its leases unanswered, never those of the other nodes, and is
        // waited for at most a share of the TTL, so that a late batch does not hold up the
        // deadlines of the leases that were renewed.
        let wait = ttl * RENEWAL_WAIT.0 / RENEWAL_WAIT.1;
        let ttl = ttl_ms(ttl);
        let answers = join_all(leases.iter().map(|(key, lease)| async move {
            let mut call = self.scripts.renew.prepare_invoke();
            call.key(self.session_keys(key).lease)
                .arg(&lease.token)
                .arg(ttl);
            let mut conn = self.conn.clone();
            let renewal = self.run(key, call.invoke_async::<i64>(&mut conn));
            match tokio::time::timeout(wait, renewal).await {
                Ok(Ok(1)) => Ok(Renewal::Renewed),
                Ok(Ok(_)) => Ok(Renewal::Lost),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("no answer within {wait:?}")),
            }
        }))
        .await;
        let mut failed = answers.iter().filter_map(|a| a.as_ref().err());
        if let Some(first) = failed.next() {
            let unanswered = 1 + failed.count();
            tracing::warn!(
                unanswered,
                of = leases.len(),
                error = %first,
                "redis store: some lease renewals were not answered; their sessions stop if \
                 they stay unanswered until their local deadline"
            );
        }
        Ok(answers
            .into_iter()
            .map(|answer| answer.unwrap_or(Renewal::Unanswered))
            .collect())
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let names = self.session_keys(key);
        let mut call = self.scripts.release.prepare_invoke();
        call.key(&names.lease).key(&names.head).arg(&lease.token);
        let mut conn = self.conn.for_session(key);
        let released: i64 = self.run(key, call.invoke_async(&mut conn)).await?;
        Ok(released == 1)
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.owner_of(key).await
    }
}
