//! `turnstile load --cluster N`: N runtimes in this process, each with its own connection to
//! the store and its own lease identity, sharing the sessions one owner at a time as N
//! `turnstile serve --cluster` processes would. Each turn goes to a runtime picked at random; a
//! runtime that does not own the session answers `OwnedElsewhere`, and the turn is sent on to
//! the owner it names, as `serve` forwards a request. Nothing ran on the refusing runtime, so
//! this never duplicates a turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;
use turnstile::{CallOptions, Error, Runtime, SessionKey};

use super::target::{acknowledge, Failure, Pending, Target, TargetCounters, TurnstileTarget};

/// Most owners one turn is sent on to before it counts as failed: a session moves only when its
/// owner passivates it, so more than a couple of hops means something is wrong.
const MAX_HOPS: usize = 8;

/// Several runtimes sharing one store's sessions.
pub struct ClusterTarget {
    members: Vec<TurnstileTarget>,
    by_address: HashMap<String, usize>,
    /// Turns sent on to the owner after a refusal.
    forwarded: AtomicU64,
    /// Picks the runtime each turn goes to first.
    next: AtomicU64,
}

impl ClusterTarget {
    /// A cluster of `runtimes`, each built with ownership at a distinct address.
    pub fn new(runtimes: Vec<Runtime>) -> Self {
        let by_address = runtimes
            .iter()
            .enumerate()
            .map(|(i, rt)| (rt.address().unwrap_or_default().to_owned(), i))
            .collect();
        Self {
            members: runtimes
                .into_iter()
                .map(|runtime| TurnstileTarget {
                    runtime,
                    ordered: false,
                })
                .collect(),
            by_address,
            forwarded: AtomicU64::new(0),
            next: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Turns sent on to their session's owner.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// A runtime picked at random (a xorshift step over a shared counter: cheap and spread).
    fn pick(&self) -> usize {
        let mut x = self
            .next
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        (x % self.members.len() as u64) as usize
    }
}

impl Target for ClusterTarget {
    async fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        _first_chunk: Option<oneshot::Sender<()>>,
    ) -> Pending<'a> {
        Box::pin(async move {
            let mut member = self.pick();
            for _ in 0..MAX_HOPS {
                let runtime = &self.members[member].runtime;
                match runtime
                    .call_with(key, input.clone(), CallOptions::default())
                    .await
                {
                    Err(Error::OwnedElsewhere { owner, .. }) => {
                        let Some(&owner) = self.by_address.get(&owner.address) else {
                            return Err(Failure::Other);
                        };
                        self.forwarded.fetch_add(1, Ordering::Relaxed);
                        member = owner;
                    }
                    result => return acknowledge(result),
                }
            }
            Err(Failure::Other)
        })
    }

    fn interrupt(&self, key: &SessionKey) -> bool {
        self.members.iter().any(|m| m.interrupt(key))
    }

    fn live_sessions(&self) -> usize {
        self.members.iter().map(Target::live_sessions).sum()
    }

    fn counters(&self) -> TargetCounters {
        self.members
            .iter()
            .map(Target::counters)
            .fold(TargetCounters::default(), |sum, c| TargetCounters {
                activations: sum.activations + c.activations,
                evictions_idle: sum.evictions_idle + c.evictions_idle,
                evictions_lru: sum.evictions_lru + c.evictions_lru,
                interrupts: sum.interrupts + c.interrupts,
                peak_live_sessions: sum.peak_live_sessions + c.peak_live_sessions,
            })
    }

    async fn finish(&self) {
        futures::future::join_all(self.members.iter().map(Target::finish)).await;
    }
}
