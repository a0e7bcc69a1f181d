//! Session leases kept in process memory, so that several runtimes in one process (tests, and
//! `turnstile load --cluster`) share sessions the way several processes share a Redis.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::{Mutex, MutexGuard};
use tokio::time::Instant;

use crate::key::SessionKey;
use crate::store::lease::not_owner;
use crate::store::{Claim, Claimant, Lease, Leases, Owner, Renewal, StoreError};

/// The leases of an [`InMemoryStore`](super::InMemoryStore). Expiry follows tokio's clock, so tests
/// that pause time control it.
#[derive(Debug, Default)]
pub(crate) struct MemoryLeases {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
pub(crate) struct Table {
    held: HashMap<SessionKey, Held>,
    /// Per-session epoch counters; never reset, also when a session is deleted.
    epochs: HashMap<SessionKey, u64>,
}

#[derive(Debug)]
struct Held {
    token: String,
    owner: Owner,
    expires: Instant,
}

impl Table {
    /// The live (unexpired) lease of `key`.
    fn current(&self, key: &SessionKey) -> Option<&Held> {
        self.held
            .get(key)
            .filter(|held| held.expires > Instant::now())
    }

    /// Refuses a write with `lease` unless it is `key`'s current lease.
    pub(crate) fn check(&self, key: &SessionKey, lease: &Lease) -> Result<(), StoreError> {
        match self.current(key) {
            Some(held) if held.token == lease.token && held.owner.epoch == lease.epoch => Ok(()),
            other => Err(not_owner(key, other.map(|held| held.owner.clone()))),
        }
    }
}

impl MemoryLeases {
    /// Locks the table; the store holds it across a fenced write so that no grant interleaves.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock()
    }
}

#[async_trait]
impl Leases for MemoryLeases {
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError> {
        let mut table = self.table.lock();
        if let Some(held) = table.current(key) {
            if held.owner.instance != me.instance {
                return Ok(Claim::Held(held.owner.clone()));
            }
        }
        let epoch = table.epochs.entry(key.clone()).or_default();
        *epoch += 1;
        let lease = Lease {
            token: uuid::Uuid::new_v4().simple().to_string(),
            epoch: *epoch,
        };
        let held = Held {
            token: lease.token.clone(),
            owner: Owner {
                address: me.address.clone(),
                instance: me.instance.clone(),
                epoch: lease.epoch,
            },
            expires: Instant::now() + ttl,
        };
        table.held.insert(key.clone(), held);
        Ok(Claim::Granted(lease))
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        let mut table = self.table.lock();
        let now = Instant::now();
        Ok(leases
            .iter()
            .map(|(key, lease)| match table.held.get_mut(key) {
                Some(held) if held.token == lease.token && held.expires > now => {
                    held.expires = now + ttl;
                    Renewal::Renewed
                }
                _ => Renewal::Lost,
            })
            .collect())
    }

    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError> {
        let mut table = self.table.lock();
        let still_ours = table
            .current(key)
            .is_some_and(|held| held.token == lease.token);
        if still_ours {
            table.held.remove(key);
        }
        Ok(still_ours)
    }

    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        Ok(self
            .table
            .lock()
            .current(key)
            .map(|held| held.owner.clone()))
    }
}
