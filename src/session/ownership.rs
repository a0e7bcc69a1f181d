//! The leases this process holds on its live sessions, when it shares a store with other
//! processes (see `docs/cluster.md`).
//!
//! A session takes its lease before it loads, fences every write with it, and gives it back
//! after its last write. One renewer per runtime (`registry::lifecycle::renewer`) extends all of
//! them in one batch; a lease the store refuses to renew, or whose local deadline passes (its
//! renewals unanswered that long), stops its session without another write.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::config::Ownership;
use crate::key::SessionKey;
use crate::store::{Claim, Lease, Leases, LoadedSession, Owner, Renewal, StoreError};

/// A lease's local deadline ends this share of its TTL before the store's expiry, so that a
/// clock running slower here than in the store cannot make this process write after it.
const MARGIN_DIVISOR: u32 = 5;

/// The leases of one runtime's live sessions.
pub(crate) struct LeaseKeeper {
    leases: Arc<dyn Leases>,
    /// The store's name, for the errors counted in metrics.
    store: &'static str,
    config: Ownership,
    held: Mutex<HashMap<SessionKey, Held>>,
    /// Sessions whose lease is lost and that have not been told to stop yet.
    lost: Mutex<Vec<SessionKey>>,
    /// Wakes the renewer when a session finds its lease lost between renewals.
    lost_wake: tokio::sync::Notify,
    /// Claims answered after their activation timed out, still on their way: each turns `true`
    /// once answered (and its grant, if any, given back).
    late: Arc<Mutex<HashMap<SessionKey, tokio::sync::watch::Receiver<bool>>>>,
}

struct Held {
    lease: Lease,
    /// Past this instant the lease may have expired in the store: no write is attempted.
    valid_until: Instant,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("config", &self.config)
            .field("held", &self.held.lock().len())
            .finish()
    }
}

impl LeaseKeeper {
    /// The keeper of `leases` (kept in the store named `store`).
    pub(crate) fn new(leases: Arc<dyn Leases>, config: Ownership, store: &'static str) -> Self {
        Self {
            leases,
            store,
            config,
            held: Mutex::new(HashMap::new()),
            lost: Mutex::new(Vec::new()),
            lost_wake: tokio::sync::Notify::new(),
            late: Arc::default(),
        }
    }

    /// A session found its lease lost: a write fenced with `fence` was refused as not the
    /// owner's, or (`None`) its lease had lapsed here. Forgets that lease and has the renewer
    /// stop the session — unless the lease held now is another one (a later activation's) or
    /// none (the renewer found it lost already): a stale report never stops a session that
    /// holds its lease.
    pub(crate) fn report_lost(&self, key: &SessionKey, fence: Option<&Lease>) {
        {
            let mut held = self.held.lock();
            let ours = match (held.get(key), fence) {
                (Some(held), Some(lease)) => held.lease == *lease,
                (Some(held), None) => Instant::now() >= held.valid_until,
                (None, _) => false,
            };
            if !ours {
                return;
            }
            held.remove(key);
        }
        metrics::counter!("turnstile_leases_lost_total", "reason" => "write").increment(1);
        self.lost.lock().push(key.clone());
        self.lost_wake.notify_one();
    }

    /// Resolves when a session reported its lease lost.
    pub(crate) async fn lost_reported(&self) {
        self.lost_wake.notified().await;
    }

    /// The sessions whose lease was lost since the last call.
    pub(crate) fn take_lost(&self) -> Vec<SessionKey> {
        std::mem::take(&mut *self.lost.lock())
    }

    /// How often the renewer runs: three chances before a lease expires.
    pub(crate) fn renew_every(&self) -> Duration {
        self.config.lease_ttl / 3
    }

    /// How soon after a round that left a held lease unanswered the renewer tries again (never
    /// later than the next third would be): a tenth of the TTL, so that a failure that passes in
    /// a moment (a timed-out batch, a store connection replaced meanwhile) costs no lease, where
    /// waiting a whole third would let two such failures in a row run past the local deadline.
    /// While a node stays down the whole batch goes out up to ten times a TTL, until that node's
    /// sessions' leases lapse.
    pub(crate) fn retry_after(&self) -> Duration {
        self.config.lease_ttl / 10
    }

    /// The local deadline of a lease granted or renewed by a request sent at `sent`.
    fn deadline(&self, sent: Instant) -> Instant {
        let ttl = self.config.lease_ttl;
        sent + ttl - ttl / MARGIN_DIVISOR
    }

    /// Takes `key`'s lease; a lease held by another process is [`StoreError::NotOwner`] naming
    /// the holder. Returns the lease granted.
    #[cfg(test)]
    pub(crate) async fn acquire(&self, key: &SessionKey) -> Result<Lease, StoreError> {
        Ok(self.acquire_loading(key, 0).await?.0)
    }

    /// Takes `key`'s lease as [`LeaseKeeper::acquire`] does, and reads the session's `window`
    /// newest events with it where the store can ([`Leases::acquire_and_load`]).
    #[cfg(test)]
    async fn acquire_loading(
        &self,
        key: &SessionKey,
        window: usize,
    ) -> Result<(Lease, Option<LoadedSession>), StoreError> {
        let sent = Instant::now();
        let (me, ttl) = (&self.config.claimant, self.config.lease_ttl);
        let answer = self.leases.acquire_and_load(key, me, ttl, window).await;
        self.grant(key, sent, answer)
    }

    /// Records the answer to a claim sent at `sent`: a granted lease is held from here on.
    fn grant(
        &self,
        key: &SessionKey,
        sent: Instant,
        answer: Result<(Claim, Option<LoadedSession>), StoreError>,
    ) -> Result<(Lease, Option<LoadedSession>), StoreError> {
        let (claim, loaded) = answer.inspect_err(|error| {
            if error.is_environmental() {
                crate::stats::store_error(self.store, "claim");
            }
        })?;
        match claim {
            Claim::Granted(lease) => {
                let held = Held {
                    lease: lease.clone(),
                    valid_until: self.deadline(sent),
                };
                self.held.lock().insert(key.clone(), held);
                Ok((lease, loaded))
            }
            Claim::Held(owner) => Err(StoreError::NotOwner {
                key: key.clone(),
                owner: Some(owner),
            }),
        }
    }

    /// Takes `key`'s lease within the activation timeout, and reads the session with it where
    /// the store can: a session loaded here is handed to its actor, which then reads nothing.
    ///
    /// A claim that outlives the timeout is not dropped: the store may grant it all the same
    /// (a script sent runs), and a grant nobody holds would keep the session from every process
    /// until it expires. It runs on in a task of `deps`, which gives such a grant back. Until
    /// that claim is answered, a new claim of the same session waits for it: sent before it, the
    /// new claim could be granted first and then taken over by the late one (a grant to this
    /// process replaces its own), and giving the late one back would leave the session with no
    /// lease at all.
    pub(crate) async fn acquire_within(
        &self,
        key: &SessionKey,
        deps: &super::SessionDeps,
    ) -> Result<(Lease, Option<LoadedSession>), StoreError> {
        let limit = deps.config.activation_timeout;
        let deadline = Instant::now() + limit;
        let timed_out = |what: &str| StoreError::Unavailable {
            backend: deps.store.name(),
            detail: format!(
                "{what} session {key}'s lease (and reading it) did not finish within {} ms \
                 (activation_timeout)",
                limit.as_millis()
            ),
        };
        let earlier = self.late.lock().get(key).cloned();
        if let Some(mut earlier) = earlier {
            // Answered (true) or given up on (the sender dropped): either way it is done.
            let answered = earlier.wait_for(|done| *done);
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                return Err(timed_out("an earlier claim of"));
            }
        }
        let sent = Instant::now();
        let leases = Arc::clone(&self.leases);
        let (claimed, me) = (key.clone(), self.config.claimant.clone());
        let (ttl, window) = (self.config.lease_ttl, deps.config.window);
        let mut claim = Box::pin(async move {
            let answer = leases.acquire_and_load(&claimed, &me, ttl, window).await;
            (leases, claimed, answer)
        });
        if let Ok((_, _, answer)) = tokio::time::timeout_at(deadline, &mut claim).await {
            return self.grant(key, sent, answer);
        }
        let (done, waiting) = tokio::sync::watch::channel(false);
        self.late.lock().insert(key.clone(), waiting.clone());
        let late = Arc::clone(&self.late);
        deps.tasks.spawn(async move {
            let (leases, key, answer) = claim.await;
            if let Ok((Claim::Granted(lease), _)) = answer {
                tracing::info!(%key, "a lease granted after its activation timed out is given back");
                if let Err(error) = leases.release(&key, &lease).await {
                    tracing::warn!(%key, %error, "late lease not released; it expires on its own");
                }
            }
            let mut late = late.lock();
            if late.get(&key).is_some_and(|w| w.same_channel(&waiting)) {
                late.remove(&key);
            }
            let _ = done.send(true);
        });
        Err(timed_out("taking"))
    }

    /// The lease a write of `key` carries now; [`StoreError::NotOwner`] when this process no
    /// longer holds it, or its local deadline has passed (then no write is attempted at all).
    pub(crate) fn fence(&self, key: &SessionKey) -> Result<Lease, StoreError> {
        match self.held.lock().get(key) {
            Some(held) if Instant::now() < held.valid_until => Ok(held.lease.clone()),
            _ => Err(StoreError::NotOwner {
                key: key.clone(),
                owner: None,
            }),
        }
    }

    /// Forgets `key`'s lease and gives it back to the store (compare-and-delete: a lease taken
    /// by someone else meanwhile is left alone). A failed release only delays the next owner
    /// until the lease expires.
    pub(crate) async fn release(&self, key: &SessionKey) {
        let Some(held) = self.held.lock().remove(key) else {
            return;
        };
        self.give_back(key, &held.lease).await;
    }

    /// Releases `lease` if it is still the one held for `key`: a newer grant for the same key
    /// (a re-activation that took over meanwhile) is left alone.
    pub(crate) async fn release_lease(&self, key: &SessionKey, lease: &Lease) {
        {
            let mut held = self.held.lock();
            if held.get(key).is_some_and(|h| h.lease == *lease) {
                held.remove(key);
            }
        }
        self.give_back(key, lease).await;
    }

    async fn give_back(&self, key: &SessionKey, lease: &Lease) {
        if let Err(error) = self.leases.release(key, lease).await {
            tracing::warn!(%key, %error, "lease not released; it expires on its own");
        }
    }

    /// Renews every lease held, in one batch. Each lease's answer counts on its own: a renewed
    /// lease gets a new local deadline; one the store refused is forgotten and reported lost
    /// ([`LeaseKeeper::take_lost`]); an unanswered one (its store node down, say) keeps the
    /// deadline it had. Leases past their local deadline — because their renewals went
    /// unanswered — are reported lost too: their sessions must stop without writing.
    ///
    /// Returns whether a lease left unanswered is still held (the renewer then tries again
    /// sooner: [`LeaseKeeper::retry_after`]).
    pub(crate) async fn renew_all(&self) -> bool {
        let batch: Vec<(SessionKey, Lease)> = self
            .held
            .lock()
            .iter()
            .map(|(key, held)| (key.clone(), held.lease.clone()))
            .collect();
        let mut unanswered = Vec::new();
        if !batch.is_empty() {
            let sent = Instant::now();
            let answers = match self.leases.renew(&batch, self.config.lease_ttl).await {
                Ok(answers) if answers.len() == batch.len() => answers,
                Ok(answers) => {
                    tracing::error!(
                        asked = batch.len(),
                        answered = answers.len(),
                        "lease renewal answered a different number of leases; none counted"
                    );
                    vec![Renewal::Unanswered; batch.len()]
                }
                Err(error) => {
                    crate::stats::store_error(self.store, "renew");
                    tracing::warn!(%error, leases = batch.len(), "lease renewal failed");
                    vec![Renewal::Unanswered; batch.len()]
                }
            };
            unanswered = batch
                .iter()
                .zip(&answers)
                .filter(|(_, answer)| **answer == Renewal::Unanswered)
                .map(|((key, _), _)| key.clone())
                .collect();
            self.record_renewals(batch, &answers, sent);
        }
        self.expire(Instant::now());
        let (held, retry) = {
            let held = self.held.lock();
            let retry = unanswered.iter().any(|key| held.contains_key(key));
            (held.len(), retry)
        };
        metrics::gauge!("turnstile_leases_held").set(held as f64);
        retry
    }

    /// Applies a batch's answers (in the batch's order) to the leases still held as they were.
    fn record_renewals(&self, batch: Vec<(SessionKey, Lease)>, answers: &[Renewal], sent: Instant) {
        // Counted before the lock is taken: every write's fence takes it too.
        let mut counts = [0u64; 3];
        for renewal in answers {
            counts[renewal_index(*renewal)] += 1;
        }
        for (i, outcome) in ["renewed", "lost", "unanswered"].into_iter().enumerate() {
            if counts[i] > 0 {
                metrics::counter!("turnstile_lease_renewals_total", "outcome" => outcome)
                    .increment(counts[i]);
            }
        }
        let mut held = self.held.lock();
        let mut refused = Vec::new();
        for ((key, lease), renewal) in batch.into_iter().zip(answers) {
            let Some(entry) = held.get_mut(&key).filter(|h| h.lease == lease) else {
                continue; // released or taken over meanwhile
            };
            match renewal {
                Renewal::Renewed => entry.valid_until = self.deadline(sent),
                Renewal::Lost => {
                    held.remove(&key);
                    refused.push(key);
                }
                // Nothing known: the deadline it had stands.
                _ => {}
            }
        }
        drop(held);
        self.report_lost_keys(refused, "refused");
    }

    /// Forgets the leases whose local deadline has passed at `now` and reports them lost.
    fn expire(&self, now: Instant) {
        let mut lapsed = Vec::new();
        self.held.lock().retain(|key, entry| {
            let valid = entry.valid_until > now;
            if !valid {
                lapsed.push(key.clone());
            }
            valid
        });
        self.report_lost_keys(lapsed, "lapsed");
    }

    fn report_lost_keys(&self, keys: Vec<SessionKey>, reason: &'static str) {
        if keys.is_empty() {
            return;
        }
        metrics::counter!("turnstile_leases_lost_total", "reason" => reason)
            .increment(keys.len() as u64);
        tracing::warn!(
            sessions = keys.len(),
            reason,
            "leases lost: their sessions stop"
        );
        self.lost.lock().extend(keys);
    }

    /// Who holds `key`'s lease, if anyone.
    pub(crate) async fn owner(&self, key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.leases.owner(key).await
    }

    /// Whether `owner` is this process.
    pub(crate) fn is_me(&self, owner: &Owner) -> bool {
        owner.instance == self.config.claimant.instance
    }

    /// This process's advertised address.
    pub(crate) fn address(&self) -> &str {
        &self.config.claimant.address
    }

    /// How many leases this process holds.
    pub(crate) fn held(&self) -> usize {
        self.held.lock().len()
    }
}

/// The index of a renewal's `outcome` label in metrics: renewed, lost, unanswered.
fn renewal_index(renewal: Renewal) -> usize {
    match renewal {
        Renewal::Renewed => 0,
        Renewal::Lost => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests;
