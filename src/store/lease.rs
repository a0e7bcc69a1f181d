//! Session leases: which process owns a session when several share one store.
//!
//! A lease gives **liveness**: it names the one process that may hold a session live, expires on
//! its own when that process dies, and is renewed by the owner while it lives. It does not give
//! **safety** on its own, since a paused or partitioned owner cannot know that its lease has
//! expired. Safety comes from fencing: every write of an owned session carries its [`Lease`]
//! ([`Store::append_fenced`](super::Store::append_fenced)), and the store checks the lease's
//! token and epoch in the same atomic step as the version compare-and-set, so a former owner can
//! never commit. `docs/cluster.md` describes the protocol and what each failure does.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::{LoadedSession, StoreError};
use crate::key::SessionKey;

/// A granted lease: the proof of ownership that a session's writes carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Random per grant: only the holder knows it.
    pub token: String,
    /// From a per-session counter that only grows: a later owner always has a larger epoch.
    pub epoch: u64,
}

/// Who holds a session's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// The holder's advertised address (for example `http://10.0.0.7:8080`), where requests for
    /// the session are forwarded.
    pub address: String,
    /// The holding process's instance id, random per start of a process.
    pub instance: String,
    /// The lease's epoch.
    pub epoch: u64,
}

/// The process asking for a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    /// Where other processes reach this one.
    pub address: String,
    /// Random per start of the process; tells a restarted process on the same address from the
    /// one that held a lease before it.
    pub instance: String,
}

impl Claimant {
    /// A claimant at `address` with a fresh random instance id.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            instance: uuid::Uuid::new_v4().simple().to_string(),
        }
    }
}

/// The answer to [`Leases::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The lease is the caller's.
    Granted(Lease),
    /// Another instance holds it.
    Held(Owner),
}

/// What became of one lease of a [`Leases::renew`] batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Renewal {
    /// Still held with its token: it lasts the TTL asked for from now.
    Renewed,
    /// No longer held with its token (it expired, was taken over or given back): its session
    /// must stop without writing.
    Lost,
    /// Not answered: the part of the store that keeps this lease could not be reached (a Redis
    /// Cluster node down, a timeout). Nothing is known; the holder keeps the deadline it had, so
    /// only sessions whose leases go unanswered until then stop — never those whose renewal
    /// was answered.
    Unanswered,
}

/// Leases on sessions, kept where the sessions are stored. Implemented by stores that several
/// processes share (Redis, and the memory store for tests and in-process clusters); a store
/// offers it through [`Store::leases`](super::Store::leases).
#[async_trait]
pub trait Leases: Send + Sync + 'static {
    /// Takes `key`'s lease for `me` for `ttl`, unless another instance holds it. A lease that
    /// `me.instance` already holds (say, one whose release failed) is taken over with a new
    /// token and epoch. The epoch comes from a per-session counter that only grows, also across
    /// deletion of the session.
    async fn acquire(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
    ) -> Result<Claim, StoreError>;

    /// [`Leases::acquire`], and when the lease is granted, the session read with the grant as
    /// [`Store::load`](super::Store::load) would read it (`window` newest events), so that an
    /// activation sends one command less. `None` beside a grant means the caller loads the
    /// session itself: this store reads nothing with a claim (the default), or the read failed
    /// (a granted lease is never undone by a failed read). A wrapper written with
    /// [`ForwardingStore`](super::ForwardingStore) reads nothing here, so that its own `load`
    /// sees every activation; one written with [`ForwardingLeases`](super::ForwardingLeases)
    /// reads nothing unless it says otherwise.
    async fn acquire_and_load(
        &self,
        key: &SessionKey,
        me: &Claimant,
        ttl: Duration,
        window: usize,
    ) -> Result<(Claim, Option<LoadedSession>), StoreError> {
        let _ = window;
        Ok((self.acquire(key, me, ttl).await?, None))
    }

    /// Extends each lease that is still held with its token to `ttl` from now. Answers, in the
    /// same order, what became of each ([`Renewal`]). One exchange for the whole batch (per
    /// node, where the store has several), not one per lease.
    ///
    /// A failure that concerns only some leases (one node of several down) answers those
    /// [`Renewal::Unanswered`] and the others as usual: one failing node must not stop sessions
    /// whose leases live elsewhere. `Err` means the whole batch went unanswered.
    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError>;

    /// Deletes the lease if it is still this one (compare-and-delete); a lease someone else
    /// took meanwhile is left alone. Returns whether it was still this one.
    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<bool, StoreError>;

    /// Who holds `key`'s lease now, if anyone.
    async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError>;
}

/// The error a write with `lease` gets when the lease is not the session's current one.
pub(crate) fn not_owner(key: &SessionKey, owner: Option<Owner>) -> StoreError {
    StoreError::NotOwner {
        key: key.clone(),
        owner,
    }
}
