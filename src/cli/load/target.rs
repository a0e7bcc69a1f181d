//! What the load driver drives: turnstile's `Runtime`, or a baseline design, behind one small
//! trait so that every design gets exactly the same workload, ledger and verification.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use turnstile::{CallOptions, Error, Outcome, OutcomeKind, Runtime, SessionKey, StreamEvent};

/// How long the runtime may take to finish its turns and flush at the end of a run.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);

/// An acknowledged turn: its answer is durable in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Sequence number of the event that answers the message: the turn's output event, or for a
    /// superseded message its own input event.
    pub seq: u64,
    /// What became of the message.
    pub kind: AckKind,
}

/// What became of an acknowledged message (the runtime's `OutcomeKind`, without the reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// Its turn ran to the end.
    Completed,
    /// Its turn was cut short (an interrupt, or a newer `latest` message).
    Interrupted,
    /// A newer `latest` message arrived before it ran; it is stored, marked superseded.
    Superseded,
    /// It was answered by a turn together with other queued `merge` messages.
    Merged,
}

/// A sent turn's answer, still to come. Boxed so that every design returns the same type; one
/// allocation per turn is noise next to a turn's own work.
pub type Pending<'a> = Pin<Box<dyn Future<Output = Result<Ack, Failure>> + Send + 'a>>;

/// A pending answer that is already known (a turn refused or finished on sending).
pub fn answered<'a>(result: Result<Ack, Failure>) -> Pending<'a> {
    Box::pin(std::future::ready(result))
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

/// A design under load. Every method may be called from many tasks at once. The driver sends
/// the turns of one session from one task, each `send` finishing before the next starts, so the
/// order of `send` calls is the session's order.
pub trait Target: Send + Sync + 'static {
    /// Sends one turn. Returns once the turn has its place in the session's order (a turn sent
    /// later is handled after it), with its answer to come: `Ok` once it is durable.
    ///
    /// When `first_chunk` is given, it is signalled when the turn has streamed its first chunk,
    /// i.e. while the turn is running: the driver interrupts it then.
    fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> impl Future<Output = Pending<'a>> + Send + 'a;

    /// Interrupts the session's running turn; whether one was running.
    fn interrupt<'a>(&'a self, key: &'a SessionKey) -> impl Future<Output = bool> + Send + 'a;

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
    /// Send every turn with `call_streaming`, whose admission into the session's FIFO is
    /// finished when it returns. Needed when several turns of a session are in flight (`--burst`
    /// above 1); otherwise plain `call_with` is used, the cheaper path an embedding would take.
    pub ordered: bool,
}

impl Target for TurnstileTarget {
    async fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> Pending<'a> {
        if first_chunk.is_none() && !self.ordered {
            return Box::pin(async move {
                let result = self
                    .runtime
                    .call_with(key, input, CallOptions::default())
                    .await;
                acknowledge(result)
            });
        }
        let stream = match self
            .runtime
            .call_streaming(key, input, CallOptions::default())
            .await
        {
            Ok(stream) => stream,
            Err(err) => return answered(Err(classify(&err))),
        };
        Box::pin(async move {
            let mut stream = stream;
            let mut first_chunk = first_chunk;
            while let Some(event) = stream.next().await {
                match event {
                    StreamEvent::Chunk(_) => {
                        if let Some(signal) = first_chunk.take() {
                            let _ = signal.send(());
                        }
                    }
                    StreamEvent::Outcome(result) => return acknowledge(result),
                    _ => {}
                }
            }
            Err(Failure::Other)
        })
    }

    async fn interrupt<'a>(&'a self, key: &'a SessionKey) -> bool {
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

/// A runtime answer as the ledger records it.
pub fn acknowledge(result: turnstile::Result<Outcome>) -> Result<Ack, Failure> {
    let outcome = result.map_err(|err| classify(&err))?;
    let kind = match outcome.kind {
        // Ran to its end: a reply the model cut short or refused is still its turn's answer.
        OutcomeKind::Completed | OutcomeKind::Incomplete(_) | OutcomeKind::Refused => {
            AckKind::Completed
        }
        OutcomeKind::Interrupted(_) => AckKind::Interrupted,
        OutcomeKind::Superseded => AckKind::Superseded,
        OutcomeKind::Merged => AckKind::Merged,
    };
    Ok(Ack {
        seq: outcome.seq,
        kind,
    })
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
