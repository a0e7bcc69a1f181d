//! The runtime seen from a deployment of several processes sharing one store: where a session
//! is served, and the leases this process holds.

use super::Runtime;
use crate::error::{Error, Result};
use crate::key::SessionKey;

impl Runtime {
    /// Where a session is served when several processes share the store
    /// ([`RuntimeConfig::ownership`](crate::RuntimeConfig::ownership)): here, at another live
    /// process, or nowhere yet (the next call anywhere takes it). Without ownership a session
    /// is `Here` when live and `Unowned` otherwise. Reads one lease; never activates.
    pub async fn placement(&self, key: &SessionKey) -> Result<Placement> {
        if self.registry().live_actor(key).is_some() {
            return Ok(Placement::Here);
        }
        let Some(keeper) = &self.registry().deps.keeper else {
            return Ok(Placement::Unowned);
        };
        let owner = keeper
            .owner(key)
            .await
            .map_err(|err| Error::store(key, err))?;
        Ok(match owner {
            None => Placement::Unowned,
            Some(owner) if keeper.is_me(&owner) => Placement::Here,
            Some(owner) => Placement::Elsewhere(owner),
        })
    }

    /// This process's advertised address, when it shares sessions with other processes.
    pub fn address(&self) -> Option<&str> {
        self.registry().deps.keeper.as_deref().map(|k| k.address())
    }

    /// The epoch of the lease this runtime holds on `key` and may still write with: `None`
    /// when it holds none (or its local deadline passed), and always without ownership. One
    /// holding of a session has one epoch, so two reads with the same epoch saw one unbroken
    /// holding.
    pub fn lease_epoch(&self, key: &SessionKey) -> Option<u64> {
        let keeper = self.registry().deps.keeper.as_deref()?;
        keeper.fence(key).ok().map(|lease| lease.epoch)
    }

    /// Leases this process holds now (0 without ownership).
    pub fn leases_held(&self) -> usize {
        self.registry()
            .deps
            .keeper
            .as_deref()
            .map_or(0, |k| k.held())
    }
}

/// Where a session is served; see [`Runtime::placement`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Live in this runtime (or its lease is this process's).
    Here,
    /// Owned by another live process.
    Elsewhere(crate::store::Owner),
    /// Not live anywhere: a call here takes it.
    Unowned,
}
