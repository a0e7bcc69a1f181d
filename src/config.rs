//! Runtime limits and policies, with their defaults.

use std::time::Duration;

use crate::call::OverlapPolicy;

/// Default most live sessions. At ~7 KB per idle session plus its window, 100k sessions is well
/// under 2 GB: large enough that a single host rarely passivates a session it will need again
/// soon, small enough that a default deployment cannot run out of memory.
pub const DEFAULT_CAPACITY: usize = 100_000;

/// Default idle time after which a session is passivated. Chat users pause for minutes between
/// messages; ten minutes keeps a conversation hot across pauses without holding idle ones for long.
pub const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(600);

/// Default most messages waiting behind a running turn in one session. A person typing ahead
/// queues a handful; more is a client loop or abuse, and should be refused rather than buffered.
pub const DEFAULT_MAX_QUEUE: usize = 64;

/// No longer used: a session keeps no events whose save failed (a write the store refused leaves
/// nothing behind, and one whose outcome is unknown is read back before the next turn), so
/// nothing accumulates during an outage; see `docs/runtime-semantics.md`, "Failures".
#[deprecated(
    since = "0.1.0",
    note = "sessions no longer keep unsaved events; there is no backlog to bound"
)]
pub const MAX_UNSAVED_EVENTS: usize = 64;

/// Default events kept in memory and shown to the agent. About a long chat exchange, which is what
/// an LLM prompt typically carries verbatim; older events stay in the store.
pub const DEFAULT_WINDOW: usize = 64;

/// Default largest input, in bytes. Far beyond any chat message, well below what would let one
/// caller exhaust memory.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// Default largest reply, in bytes: what a turn streams and returns. Past it the turn is cut
/// short (`InterruptReason::ReplyLimit`) and its first this many bytes are kept. A model's
/// longest answers (tens of thousands of tokens, a few hundred KB) fit; a model, or an agent,
/// that streams without end is stopped before one reply grows the process and the stored event
/// without bound. Twice the largest input: an answer may quote the question.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 2 * MAX_MESSAGE_BYTES;

/// Most entries one message may bring with it (`CallOptions::preceding`): an OpenAI client that
/// keeps its own history (LangChain, the Agents SDK's sessions) resends it whole with every
/// request, its tool calls and results among it, so a few hundred exchanges must fit. Every
/// entry is bounded by `max_input_bytes` and an HTTP body by its limit; this bounds how many
/// events one message makes its turn write.
pub const MAX_PRECEDING_ENTRIES: usize = 1024;

/// Longest reason a `turn_failed` event keeps, in bytes: a sentence or a short paragraph says
/// what went wrong; an agent's error of megabytes (a server's HTML page, a dump) is cut rather
/// than stored in every copy of the session's log.
pub const MAX_FAILURE_REASON_BYTES: usize = 1024;

/// Default limit on turns running at once across the runtime: unlimited, since agents mostly wait
/// on I/O; set one to protect a rate-limited LLM backend.
pub const DEFAULT_MAX_CONCURRENT_TURNS: Option<usize> = None;

/// Default longest wait for a session's load from the store when it is activated. A healthy
/// store answers in milliseconds; a load that takes this long is a store that is down or stuck,
/// and its callers are better told so (and free to retry) than held for ever.
pub const DEFAULT_ACTIVATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time between two probes of the store for readiness
/// ([`Runtime::readiness`](crate::Runtime::readiness)): a second costs one `PING` per process
/// per second, and with three unanswered probes before "not ready" a load balancer hears of a
/// lost store within about three seconds.
pub const DEFAULT_STORE_PROBE: Duration = Duration::from_secs(1);

/// The runtime's settings. Build with [`crate::RuntimeBuilder`].
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Most live sessions; past it the least recently used idle ones are passivated.
    pub capacity: usize,
    /// How long a call waits for a session slot when the runtime is at capacity before
    /// `Error::AtCapacity`; zero refuses at once.
    pub capacity_wait: Duration,
    /// Idle time after which a session is passivated.
    pub idle_ttl: Duration,
    /// Most messages waiting behind a running turn, per session (`Error::Overloaded` past it).
    pub max_queue: usize,
    /// Most turns running at once across the runtime, if limited.
    pub max_concurrent_turns: Option<usize>,
    /// How long a turn waits for a slot under `max_concurrent_turns` before
    /// `Error::ConcurrencyLimitExceeded`; zero refuses at once.
    pub concurrency_wait: Duration,
    /// A turn running longer than this is interrupted (`InterruptReason::Deadline`).
    pub turn_deadline: Option<Duration>,
    /// What happens to a message for a busy session, unless the call says otherwise.
    pub default_policy: OverlapPolicy,
    /// Events kept in memory and shown to the agent.
    pub window: usize,
    /// Compact (summarise what slid out of the window) once more than this many events are not
    /// covered by the summary. Needs a summarizer; `None` turns compaction off.
    pub compact_after: Option<usize>,
    /// Largest accepted input, in bytes.
    pub max_input_bytes: usize,
    /// Largest reply, in bytes: past it the turn is cut short with
    /// `InterruptReason::ReplyLimit`, keeping its first `max_reply_bytes` bytes.
    pub max_reply_bytes: usize,
    /// Longest wait for a session's load when it is activated. Past it the activation fails
    /// (`Error::Activation` with a store that did not answer), its callers are answered, its
    /// slot is freed, and the next call tries again.
    pub activation_timeout: Duration,
    /// Sharing sessions with other processes on one store, one owner per session
    /// (`docs/cluster.md`); `None` (the default) when this process is the store's only user.
    pub ownership: Option<Ownership>,
    /// Time between two readiness probes of the store ([`crate::Store::ping`]); the runtime is
    /// not ready once three in a row went unanswered.
    pub store_probe: Duration,
}

pub use crate::call::{MAX_FINGERPRINT_BYTES, MAX_REQUEST_ID_BYTES};

/// Default lease TTL: a dead owner's sessions move to another process within about this long.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// How a runtime shares its store's sessions with other processes: it takes a lease on each
/// session it activates, fences every write with it, and answers
/// [`Error::OwnedElsewhere`](crate::Error::OwnedElsewhere) for a session another live process
/// holds.
#[derive(Debug, Clone)]
pub struct Ownership {
    /// This process as the others know it: its advertised address and a random instance id.
    pub claimant: crate::store::Claimant,
    /// How long a lease lasts without renewal. The renewer extends leases every third of it (a
    /// tenth of it after a batch left one unanswered); a lease not renewed for four fifths of it
    /// stops its session here without another write.
    pub lease_ttl: Duration,
}

impl Ownership {
    /// A process reachable at `address` (for example `http://10.0.0.7:8080`), with a fresh
    /// instance id and [`DEFAULT_LEASE_TTL`].
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            claimant: crate::store::Claimant::new(address),
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }

    /// Sets the lease TTL.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            capacity: DEFAULT_CAPACITY,
            capacity_wait: Duration::ZERO,
            idle_ttl: DEFAULT_IDLE_TTL,
            max_queue: DEFAULT_MAX_QUEUE,
            max_concurrent_turns: DEFAULT_MAX_CONCURRENT_TURNS,
            concurrency_wait: Duration::ZERO,
            turn_deadline: None,
            default_policy: OverlapPolicy::Queue,
            window: DEFAULT_WINDOW,
            compact_after: None,
            max_input_bytes: MAX_MESSAGE_BYTES,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            activation_timeout: DEFAULT_ACTIVATION_TIMEOUT,
            ownership: None,
            store_probe: DEFAULT_STORE_PROBE,
        }
    }
}

#[cfg(all(test, any(feature = "redis", feature = "postgres")))]
mod tests {
    use super::*;

    /// The stores know nothing of the runtime, so their head caches state their own default;
    /// it is meant to hold every session a default runtime keeps live.
    #[test]
    fn the_stores_head_caches_hold_a_default_runtimes_live_sessions() {
        #[cfg(feature = "redis")]
        assert_eq!(
            crate::backend::RedisOptions::DEFAULT_HEAD_CACHE,
            DEFAULT_CAPACITY
        );
        #[cfg(feature = "postgres")]
        assert_eq!(
            crate::backend::PostgresOptions::DEFAULT_HEAD_CACHE,
            DEFAULT_CAPACITY
        );
    }
}
