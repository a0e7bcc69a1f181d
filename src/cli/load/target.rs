//! What the load driver drives: turnstile's `Runtime`, or a baseline design, behind one small
//! trait so that every design gets exactly the same workload, ledger and verification.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use turnstile::{CallOptions, Error, OutcomeKind, Runtime, SessionKey};

/// How long the runtime may take to finish its turns and flush at the end of a run.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);

/// An acknowledged turn: its answer is durable in the store.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    /// Sequence number of the event that answers the message.
    pub seq: u64,
    /// The turn was cut short by an interrupt.
    pub interrupted: bool,
}

/// Why a turn was not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// `Busy` (the `reject` policy).
    Busy,
    /// `Overloaded` (the session's queue was full).
    Overloaded,
    /// `AtCapacity` (no slot for a new live session in time).
    AtCapacity,
    /// `ConcurrencyLimitExceeded`.
    ConcurrencyLimit,
    /// `Draining`.
    Draining,
    /// The store failed; the turn was not acknowledged.
    Store,
    /// The agent failed.
    Agent,
    /// Anything else.
    Other,
}

/// Failed turns by reason. The first five are rejections by a limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureCounts {
    /// `Busy` answers.
    pub busy: u64,
    /// `Overloaded` answers.
    pub overloaded: u64,
    /// `AtCapacity` answers.
    pub at_capacity: u64,
    /// `ConcurrencyLimitExceeded` answers.
    pub concurrency_limit: u64,
    /// `Draining` answers.
    pub draining: u64,
    /// Store failures.
    pub store: u64,
    /// Agent failures.
    pub agent: u64,
    /// Other errors.
    pub other: u64,
}

impl FailureCounts {
    /// Counts one failure.
    pub fn add(&mut self, failure: Failure) {
        let slot = match failure {
            Failure::Busy => &mut self.busy,
            Failure::Overloaded => &mut self.overloaded,
            Failure::AtCapacity => &mut self.at_capacity,
            Failure::ConcurrencyLimit => &mut self.concurrency_limit,
            Failure::Draining => &mut self.draining,
            Failure::Store => &mut self.store,
            Failure::Agent => &mut self.agent,
            Failure::Other => &mut self.other,
        };
        *slot += 1;
    }

    /// Calls refused by a limit (as opposed to failures of the store or agent).
    pub fn rejections(&self) -> u64 {
        self.busy + self.overloaded + self.at_capacity + self.concurrency_limit + self.draining
    }

    /// Every failed call.
    pub fn total(&self) -> u64 {
        self.rejections() + self.store + self.agent + self.other
    }
}

/// Counters a design keeps about itself; zero where it has no such notion.
#[derive(Debug, Clone, Copy, Default)]
pub struct TargetCounters {
    /// Sessions loaded from the store into memory.
    pub activations: u64,
    /// Sessions passivated after their idle TTL.
    pub evictions_idle: u64,
    /// Sessions passivated to stay under the capacity.
    pub evictions_lru: u64,
    /// Interrupts that reached a running turn.
    pub interrupts: u64,
    /// The most sessions held in memory at once.
    pub peak_live_sessions: usize,
}

/// A design under load. Every method may be called from many tasks at once; the driver never
/// sends two turns of one session concurrently.
pub trait Target: Send + Sync + 'static {
    /// Runs one turn and returns once it is durable.
    fn turn(
        &self,
        key: &SessionKey,
        input: String,
    ) -> impl Future<Output = Result<Ack, Failure>> + Send;

    /// Interrupts the session's running turn; whether one was running.
    fn interrupt(&self, key: &SessionKey) -> bool;

    /// Sessions held in memory now.
    fn live_sessions(&self) -> usize;

    /// The design's own counters.
    fn counters(&self) -> TargetCounters;

    /// Finishes and flushes everything before the verification pass reads the store.
    fn finish(&self) -> impl Future<Output = ()> + Send;
}

/// turnstile itself, through its public API.
pub struct TurnstileTarget {
    /// The runtime under load.
    pub runtime: Runtime,
}

impl Target for TurnstileTarget {
    async fn turn(&self, key: &SessionKey, input: String) -> Result<Ack, Failure> {
        match self
            .runtime
            .call_with(key, input, CallOptions::default())
            .await
        {
            Ok(outcome) => Ok(Ack {
                seq: outcome.seq,
                interrupted: matches!(outcome.kind, OutcomeKind::Interrupted(_)),
            }),
            Err(err) => Err(classify(&err)),
        }
    }

    fn interrupt(&self, key: &SessionKey) -> bool {
        self.runtime.interrupt(key)
    }

    fn live_sessions(&self) -> usize {
        self.runtime.live_sessions()
    }

    fn counters(&self) -> TargetCounters {
        let stats = self.runtime.stats();
        TargetCounters {
            activations: stats.activations,
            evictions_idle: stats.evictions_idle,
            evictions_lru: stats.evictions_lru,
            interrupts: stats.interrupts,
            peak_live_sessions: stats.peak_live_sessions,
        }
    }

    async fn finish(&self) {
        let report = self.runtime.drain(DRAIN_DEADLINE).await;
        if !report.clean {
            tracing::warn!(left = report.left, "the runtime did not drain cleanly");
        }
    }
}

/// Sorts a runtime error into a report column.
fn classify(err: &Error) -> Failure {
    match err {
        Error::Busy { .. } => Failure::Busy,
        Error::Overloaded { .. } => Failure::Overloaded,
        Error::AtCapacity { .. } => Failure::AtCapacity,
        Error::ConcurrencyLimitExceeded { .. } => Failure::ConcurrencyLimit,
        Error::Draining => Failure::Draining,
        Error::Store { .. } | Error::Storage(_) | Error::Activation { .. } => Failure::Store,
        Error::AgentFailed { .. } => Failure::Agent,
        _ => Failure::Other,
    }
}
