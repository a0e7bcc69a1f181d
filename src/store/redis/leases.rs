//! Session leases in Redis: one hash per session in the session's own slot (token, owner's
//! address and instance, epoch; expiring), and an epoch counter beside it that only grows.
//! Fenced appends check the lease inside `append.lua` (see `super::append`).

use std::time::Duration;

use async_trait::async_trait;
use futures::future::try_join_all;

use super::codec::corrupt;
use super::RedisStore;
use crate::key::SessionKey;
use crate::store::{Claim, Claimant, Lease, Leases, Owner, StoreError};

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
}

#[async_trait]
impl Leases for RedisStore {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        let names = self.session_keys(key);
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut call = self.scripts.acquire.prepare_invoke();
        call.key(&names.lease)
            .key(&names.epoch)
            .arg(&token)
            .arg(&me.address)
            .arg(&me.instance)
            .arg(ttl_ms(ttl));
        let mut conn = self.conn.for_session(key);
        let reply: Vec<Option<String>> = self.run(key, call.invoke_async(&mut conn)).await?;
        let mut reply = reply.into_iter();
        let outcome = reply.next().flatten();
        let mut field = || reply.next().flatten();
        match outcome.as_deref() {
            Some("1") => {
                let epoch = field().unwrap_or_default();
                let epoch = epoch
                    .parse()
                    .map_err(|_| corrupt(key, format!("lease epoch {epoch:?} is not a number")))?;
                Ok(Claim::Granted(Lease { token, epoch }))
            }
            Some("0") => {
                let (address, instance, epoch) = (field(), field(), field());
                owner_from(key, address, instance, epoch)?
                    .map(Claim::Held)
                    .ok_or_else(|| corrupt(key, "a held lease has no owner"))
            }
            _ => Err(corrupt(key, "unexpected reply to a lease claim")),
        }
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<bool>, StoreError> {
        // All sent at once: each connection pipelines them (one exchange per Redis node), and
        // on a Cluster each goes to its own session's slot.
        let ttl = ttl_ms(ttl);
        try_join_all(leases.iter().map(|(key, lease)| async move {
            let mut call = self.scripts.renew.prepare_invoke();
            call.key(self.session_keys(key).lease)
                .arg(&lease.token)
                .arg(ttl);
            let mut conn = self.conn.clone();
            let renewed: i64 = self.run(key, call.invoke_async(&mut conn)).await?;
            Ok(renewed == 1)
        }))
        .await
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let mut call = self.scripts.release.prepare_invoke();
        call.key(self.session_keys(key).lease).arg(&lease.token);
        let mut conn = self.conn.for_session(key);
        let released: i64 = self.run(key, call.invoke_async(&mut conn)).await?;
        Ok(released == 1)
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.owner_of(key).await
    }
}
