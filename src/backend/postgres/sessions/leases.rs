//! Session leases in PostgreSQL: one owner per session across processes sharing a schema.
//!
//! A lease is a row of `leases` whose expiry follows the database server's clock, the one clock
//! every process shares; each grant takes its epoch from `lease_epochs`, a counter per session
//! that outlives the session. Fenced appends check the lease row in the same statement as the
//! version compare-and-set, holding it `FOR SHARE` until they commit (see `sql.rs`).

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;

use super::PostgresStore;
use crate::key::SessionKey;
use crate::store::{Claim, Claimant, Lease, Leases, Owner, Renewal, StoreError};

/// A TTL in whole milliseconds, at least 1.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}

impl PostgresStore {
    /// Why an append was refused: the lease (for a fenced write), a newer epoch, or the version.
    /// Reads what is there now, for the error and for the next attempt.
    pub(super) async fn refusal(
        &self,
        key: &SessionKey,
        base_version: u64,
        fence: Option<&Lease>,
    ) -> StoreError {
        if let Some(lease) = fence {
            match self.fence_refusal(key, lease).await {
                Ok(Some(refusal)) => return refusal,
                Ok(None) => {}
                Err(error) => return error,
            }
        }
        let stored = match self.head(key).await {
            Ok(stored) => stored,
            Err(error) => return error,
        };
        let found = stored.as_ref().map_or(0, |h| h.record.version);
        self.remember(key, stored);
        StoreError::Conflict {
            key: key.clone(),
            expected: base_version,
            found,
        }
    }

    /// The holder of `key`'s unexpired lease, with its token.
    async fn holder(&self, key: &SessionKey) -> Result<Option<(Owner, String)>, StoreError> {
        let rows = self
            .read(
                &key.to_string(),
                &self.sql.holder,
                &[&key.user_id(), &key.session_id()],
            )
            .await?;
        Ok(rows.first().map(|row| {
            let owner = Owner {
                address: row.get(0),
                instance: row.get(1),
                epoch: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
            };
            (owner, row.get(3))
        }))
    }

    /// Why a fenced write with `lease` is refused, if it is for ownership reasons: the lease is
    /// not the session's (`NotOwner`), or a newer epoch wrote the head (`Fenced`). `None` when
    /// the lease holds (the refusal was the version's).
    pub(super) async fn fence_refusal(
        &self,
        key: &SessionKey,
        lease: &Lease,
    ) -> Result<Option<StoreError>, StoreError> {
        match self.holder(key).await? {
            Some((owner, token)) if token == lease.token && owner.epoch == lease.epoch => {}
            other => {
                return Ok(Some(StoreError::NotOwner {
                    key: key.clone(),
                    owner: other.map(|(owner, _)| owner),
                }))
            }
        }
        let rows = self
            .read(
                &key.to_string(),
                &self.sql.fence_of,
                &[&key.user_id(), &key.session_id()],
            )
            .await?;
        let current = rows
            .first()
            .map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0));
        Ok((current > lease.epoch).then(|| StoreError::Fenced {
            key: key.clone(),
            epoch: lease.epoch,
            current,
        }))
    }
}

#[async_trait]
impl Leases for PostgresStore {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let rows = self
            .query(
                &key.to_string(),
                &self.sql.acquire,
                &[
                    &key.user_id(),
                    &key.session_id(),
                    &token,
                    &me.address,
                    &me.instance,
                    &ttl_ms(ttl),
                ],
            )
            .await?;
        if let Some(row) = rows.first() {
            let epoch = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
            return Ok(Claim::Granted(Lease { token, epoch }));
        }
        match self.holder(key).await? {
            Some((owner, _)) => Ok(Claim::Held(owner)),
            // Released or expired between the two statements: try once more.
            None => Box::pin(self.acquire(key, me, ttl)).await,
        }
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let users: Vec<&str> = leases.iter().map(|(k, _)| k.user_id()).collect();
        let sessions: Vec<&str> = leases.iter().map(|(k, _)| k.session_id()).collect();
        let tokens: Vec<&str> = leases.iter().map(|(_, l)| l.token.as_str()).collect();
        let rows = self
            .query(
                "lease renewal",
                &self.sql.renew,
                &[&users, &sessions, &tokens, &ttl_ms(ttl)],
            )
            .await?;
        let renewed: HashSet<(String, String)> = rows
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
            .collect();
        Ok(leases
            .iter()
            .map(|(k, _)| {
                if renewed.contains(&(k.user_id().to_owned(), k.session_id().to_owned())) {
                    Renewal::Renewed
                } else {
                    Renewal::Lost
                }
            })
            .collect())
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let rows = self
            .query(
                &key.to_string(),
                &self.sql.release,
                &[&key.user_id(), &key.session_id(), &lease.token],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        Ok(self.holder(key).await?.map(|(owner, _)| owner))
    }
}
