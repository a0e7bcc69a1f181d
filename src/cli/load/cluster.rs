//! `turnstile load --cluster N`: N runtimes in this process, each with its own connection to
//! the store and its own lease identity, sharing the sessions one owner at a time as N
//! `turnstile serve --cluster` processes would. Each turn goes to a runtime picked at random; a
//! runtime that does not own the session answers `OwnedElsewhere`, and the turn is sent on to
//! the owner it names, as `serve` forwards a request. Nothing ran on the refusing runtime, so
//! this never duplicates a turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::oneshot;
use turnstile::{CallOptions, Error, Runtime, SessionKey};

use turnstile::backend::{open_store, StoreUrl};
use turnstile::config::Ownership;

use super::report::{ClusterFigures, Report};
use super::target::{acknowledge, Failure, Pending, Target, TargetCounters, TurnstileTarget};
use super::{build_runtime, keys, measure, report, LoadArgs};

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

    async fn interrupt<'a>(&'a self, key: &'a SessionKey) -> bool {
        self.members.iter().any(|m| m.runtime.interrupt(key))
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

/// `--cluster N`: N runtimes sharing the store's sessions, one owner per session.
pub async fn run(args: &LoadArgs, run_id: &str) -> Result<Report, String> {
    let n = args.cluster.unwrap_or(1);
    let first = open_store(&args.store).await.map_err(|e| e.to_string())?;
    if first.store().leases().is_none() {
        return Err(format!(
            "--cluster needs a store that keeps leases (redis://…, memory); {} does not",
            args.store
        ));
    }
    // Each runtime gets its own handle (its own connection), as a process would; the memory
    // store is one per process, so its runtimes share the one handle.
    let mut stores = vec![first.store().clone()];
    for _ in 1..n {
        let store = if matches!(args.store, StoreUrl::Memory) {
            first.store().clone()
        } else {
            open_store(&args.store)
                .await
                .map_err(|e| e.to_string())?
                .store()
                .clone()
        };
        stores.push(store);
    }
    let runtimes = stores
        .into_iter()
        .enumerate()
        .map(|(i, store)| {
            let ownership = Ownership::new(format!("load-member-{i}"));
            build_runtime(args, store, Some(ownership))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let keys = keys(args, "cluster", run_id)?;
    let target = Arc::new(ClusterTarget::new(runtimes));
    let figures = measure(
        args,
        target.clone(),
        keys,
        first.store().as_ref(),
        "cluster",
    )
    .await?;
    let mut report = report(args, run_id, first.describe(), figures);
    report.cluster = Some(ClusterFigures {
        processes: n,
        forwarded: target.forwarded(),
    });
    Ok(report)
}
