//! Building a [`Runtime`]: the agent, the store and the settings, checked before anything runs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::readiness::{prober, StoreHealth};
use super::{Runtime, RuntimeInner};
use crate::agent::Agent;
use crate::artifact::ArtifactStore;
use crate::config::RuntimeConfig;
use crate::context::Summarizer;
use crate::memory::{MemoryOptions, MemoryStore};
use crate::registry::{reaper, renewer, Registry};
use crate::session::LeaseKeeper;
use crate::session::{MemoryDeps, SessionDeps};
use crate::state_keys::StateKeys;
use crate::stats::Counters;
use crate::store::Store;

/// The longest time setting accepted. Deadlines are instants (now + setting), which cannot
/// reach past the clock's range: a setting meaning "never" would overflow them. A hundred years
/// is "never" for any process.
const LONGEST_SETTING: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Shortest lease TTL: renewals every third of it must fit a store round trip with room to spare.
const MIN_LEASE_TTL: Duration = Duration::from_millis(300);

/// Why a runtime could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No agent was given.
    #[error("no agent: call RuntimeBuilder::agent")]
    MissingAgent,
    /// No store was given.
    #[error(
        "no store: call RuntimeBuilder::store (InMemoryStore for tests, FileStore for one host)"
    )]
    MissingStore,
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    InvalidConfig(String),
    /// `build` ran outside a tokio runtime.
    #[error("RuntimeBuilder::build must be called from within a tokio runtime")]
    NoTokioRuntime,
}

/// Builds a [`Runtime`]. An agent and a store are required; everything else has a default
/// (see [`RuntimeConfig`]).
#[derive(Default)]
pub struct RuntimeBuilder {
    agent: Option<Arc<dyn Agent>>,
    store: Option<Arc<dyn Store>>,
    summarizer: Option<Arc<dyn Summarizer>>,
    config: RuntimeConfig,
    // --- artifacts and declared state keys ---
    artifacts: Option<Arc<dyn ArtifactStore>>,
    state_keys: Option<Arc<StateKeys>>,
    /// Memory across sessions (see `with_memory`).
    memory: Option<(Arc<dyn MemoryStore>, MemoryOptions)>,
    /// Bytes of the requests sent to the model kept for reading (see `keep_sent_requests`);
    /// `None` for the default.
    sent_request_bytes: Option<usize>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("agent", &self.agent.is_some())
            .field("store", &self.store.is_some())
            .field("summarizer", &self.summarizer.is_some())
            .field("config", &self.config)
            .field("artifacts", &self.artifacts.is_some())
            .field("state_keys", &self.state_keys.is_some())
            .field("memory", &self.memory.as_ref().map(|(_, options)| options))
            .field("sent_request_bytes", &self.sent_request_bytes)
            .finish()
    }
}

impl RuntimeBuilder {
    /// The agent that runs every turn.
    pub fn agent(mut self, agent: impl Agent) -> Self {
        self.agent = Some(Arc::new(agent));
        self
    }

    /// The agent, already shared.
    pub fn agent_arc(mut self, agent: Arc<dyn Agent>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Where sessions are persisted.
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The store, already shared.
    pub fn store_arc(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// How many bytes of the requests turns sent their model this process keeps in memory,
    /// for [`Runtime::sent_requests`]: the oldest turns' go first; `0` keeps none. Default
    /// [`crate::agent::DEFAULT_SENT_REQUEST_BYTES`] (16 MiB).
    pub fn keep_sent_requests(mut self, bytes: usize) -> Self {
        self.sent_request_bytes = Some(bytes);
        self
    }

    /// Replaces every setting at once.
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// Most live sessions ([`RuntimeConfig::capacity`]).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.config.capacity = capacity;
        self
    }

    /// How long a call waits for a free slot at capacity ([`RuntimeConfig::capacity_wait`]).
    pub fn with_capacity_wait(mut self, wait: Duration) -> Self {
        self.config.capacity_wait = wait;
        self
    }

    /// Idle time before passivation ([`RuntimeConfig::idle_ttl`]).
    pub fn with_idle_ttl(mut self, ttl: Duration) -> Self {
        self.config.idle_ttl = ttl;
        self
    }

    /// Most waiting messages per session ([`RuntimeConfig::max_queue`]).
    pub fn with_max_queue(mut self, max_queue: usize) -> Self {
        self.config.max_queue = max_queue;
        self
    }

    /// Most turns running at once ([`RuntimeConfig::max_concurrent_turns`]), waiting up to
    /// `wait` for a slot.
    pub fn with_max_concurrent_turns(mut self, limit: usize, wait: Duration) -> Self {
        self.config.max_concurrent_turns = Some(limit);
        self.config.concurrency_wait = wait;
        self
    }

    /// Longest wait for a session's load on activation
    /// ([`RuntimeConfig::activation_timeout`]).
    pub fn with_activation_timeout(mut self, timeout: Duration) -> Self {
        self.config.activation_timeout = timeout;
        self
    }

    /// Time between two readiness probes of the store ([`RuntimeConfig::store_probe`]).
    pub fn with_store_probe(mut self, interval: Duration) -> Self {
        self.config.store_probe = interval;
        self
    }

    /// Interrupt turns that run longer than this ([`RuntimeConfig::turn_deadline`]).
    pub fn with_turn_deadline(mut self, deadline: Duration) -> Self {
        self.config.turn_deadline = Some(deadline);
        self
    }

    /// The default overlap policy ([`RuntimeConfig::default_policy`]).
    pub fn with_policy(mut self, policy: crate::call::OverlapPolicy) -> Self {
        self.config.default_policy = policy;
        self
    }

    /// Events shown to the agent and kept in memory ([`RuntimeConfig::window`]).
    pub fn with_window(mut self, window: usize) -> Self {
        self.config.window = window;
        self
    }

    /// Compacts sessions with `summarizer` once more than `compact_after` events are not covered
    /// by their summary ([`RuntimeConfig::compact_after`]).
    pub fn with_summarizer(mut self, summarizer: impl Summarizer, compact_after: usize) -> Self {
        self.summarizer = Some(Arc::new(summarizer));
        self.config.compact_after = Some(compact_after);
        self
    }

    /// Largest accepted input ([`RuntimeConfig::max_input_bytes`]).
    pub fn with_max_input_bytes(mut self, max: usize) -> Self {
        self.config.max_input_bytes = max;
        self
    }

    /// Largest reply ([`RuntimeConfig::max_reply_bytes`]): a turn that streams or returns more
    /// is cut short with `InterruptReason::ReplyLimit`, keeping its first `max` bytes.
    pub fn with_max_reply_bytes(mut self, max: usize) -> Self {
        self.config.max_reply_bytes = max;
        self
    }

    /// Shares the store's sessions with other processes, one owner per session
    /// ([`RuntimeConfig::ownership`]). The store must keep leases ([`Store::leases`]).
    pub fn with_ownership(mut self, ownership: crate::config::Ownership) -> Self {
        self.config.ownership = Some(ownership);
        self
    }

    // --- artifacts and declared state keys ---

    /// Where turns save artifacts ([`crate::TurnContext::save_artifact`]); `Runtime::delete`,
    /// `delete_user` and `fork` then take artifacts along.
    pub fn with_artifacts(mut self, store: Arc<dyn ArtifactStore>) -> Self {
        self.artifacts = Some(store);
        self
    }

    /// Declared state keys: their defaults apply to unset keys, and their mode decides what
    /// becomes of a turn that writes an undeclared or mistyped key (see [`crate::state_keys`]).
    pub fn state_keys(mut self, keys: StateKeys) -> Self {
        self.state_keys = Some(Arc::new(keys));
        self
    }

    // --- Memory across sessions -------------------------------------------------------------

    /// Remembers what users said across their sessions in `store`: sessions are ingested when
    /// `options.ingest` says, [`TurnContext::recall`](crate::TurnContext::recall) searches it,
    /// and `options.auto_recall` recalls with each turn's input. [`Runtime::delete`] and
    /// [`Runtime::delete_user`] remove memory too. See `docs/memory.md`.
    pub fn with_memory(self, store: impl MemoryStore, options: MemoryOptions) -> Self {
        self.with_memory_arc(Arc::new(store), options)
    }

    /// [`RuntimeBuilder::with_memory`] with a store already shared.
    pub fn with_memory_arc(mut self, store: Arc<dyn MemoryStore>, options: MemoryOptions) -> Self {
        self.memory = Some((store, options));
        self
    }

    fn memory_deps(
        memory: Option<(Arc<dyn MemoryStore>, MemoryOptions)>,
    ) -> Result<Option<MemoryDeps>, BuildError> {
        let Some((store, options)) = memory else {
            return Ok(None);
        };
        if let Some(k) = options.auto_recall {
            if k == 0 || k > crate::memory::MAX_K {
                return Err(BuildError::InvalidConfig(format!(
                    "auto_recall must be between 1 and {} entries",
                    crate::memory::MAX_K
                )));
            }
        }
        Ok(Some(MemoryDeps { store, options }))
    }

    // -----------------------------------------------------------------------------------------

    /// Builds the runtime and starts its idle reaper. Must run inside a tokio runtime.
    pub fn build(self) -> Result<Runtime, BuildError> {
        let agent = self.agent.ok_or(BuildError::MissingAgent)?;
        let store = self.store.ok_or(BuildError::MissingStore)?;
        let config = self.config;
        if config.capacity == 0 {
            return Err(BuildError::InvalidConfig(
                "capacity must be at least 1".into(),
            ));
        }
        if config.activation_timeout.is_zero() {
            return Err(BuildError::InvalidConfig(
                "activation_timeout must be positive".into(),
            ));
        }
        if config.idle_ttl.is_zero() {
            return Err(BuildError::InvalidConfig(
                "idle_ttl must be positive".into(),
            ));
        }
        if config.store_probe.is_zero() {
            return Err(BuildError::InvalidConfig(
                "store_probe must be positive".into(),
            ));
        }
        let durations = [
            ("idle_ttl", Some(config.idle_ttl)),
            ("capacity_wait", Some(config.capacity_wait)),
            ("concurrency_wait", Some(config.concurrency_wait)),
            ("turn_deadline", config.turn_deadline),
            ("activation_timeout", Some(config.activation_timeout)),
            ("store_probe", Some(config.store_probe)),
        ];
        for (name, value) in durations {
            if value.is_some_and(|d| d > LONGEST_SETTING) {
                return Err(BuildError::InvalidConfig(format!(
                    "{name} must be at most {} days",
                    LONGEST_SETTING.as_secs() / 86_400
                )));
            }
        }
        if config.compact_after.is_some() && self.summarizer.is_none() {
            return Err(BuildError::InvalidConfig(
                "compact_after is set but no summarizer was given".into(),
            ));
        }
        if config.max_reply_bytes == 0 {
            return Err(BuildError::InvalidConfig(
                "max_reply_bytes must be at least 1".into(),
            ));
        }
        if config.max_concurrent_turns == Some(0) {
            return Err(BuildError::InvalidConfig(
                "max_concurrent_turns must be at least 1".into(),
            ));
        }
        let keeper = match &config.ownership {
            None => None,
            Some(ownership) => {
                let leases = store.leases().ok_or_else(|| {
                    BuildError::InvalidConfig(format!(
                        "ownership needs a store that keeps leases (redis, memory); the {} store does not",
                        store.name()
                    ))
                })?;
                if ownership.lease_ttl < MIN_LEASE_TTL || ownership.lease_ttl > LONGEST_SETTING {
                    return Err(BuildError::InvalidConfig(format!(
                        "lease_ttl must be between {} ms and {} days",
                        MIN_LEASE_TTL.as_millis(),
                        LONGEST_SETTING.as_secs() / 86_400
                    )));
                }
                let keeper = LeaseKeeper::new(leases, ownership.clone(), store.name());
                Some(Arc::new(keeper))
            }
        };
        let memory = Self::memory_deps(self.memory)?;
        tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoTokioRuntime)?;
        let deps = Arc::new(SessionDeps {
            keeper: keeper.clone(),
            store,
            agent,
            summarizer: self.summarizer,
            turn_permits: config
                .max_concurrent_turns
                .map(|n| Arc::new(Semaphore::new(n))),
            config,
            epoch: Instant::now(),
            counters: Counters::default(),
            artifacts: self.artifacts,
            state_keys: self.state_keys,
            memory,
            tasks: tokio_util::task::TaskTracker::new(),
            draining: CancellationToken::new(),
            sent_requests: Arc::new(crate::agent::SentRequestLog::new(
                self.sent_request_bytes
                    .unwrap_or(crate::agent::DEFAULT_SENT_REQUEST_BYTES),
            )),
        });
        let health = Arc::new(StoreHealth::new(deps.config.store_probe));
        let registry = Registry::new(deps);
        let shutdown = CancellationToken::new();
        let tasks = &registry.deps.tasks;
        tasks.spawn(reaper(registry.clone(), shutdown.clone()));
        if let Some(keeper) = keeper {
            tasks.spawn(renewer(registry.clone(), keeper, shutdown.clone()));
        }
        let store = registry.deps.store.clone();
        tasks.spawn(prober(store, health.clone(), shutdown.clone()));
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                registry,
                shutdown,
                health,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EchoAgent, InMemoryStore};

    fn builder() -> RuntimeBuilder {
        Runtime::builder()
            .agent(EchoAgent)
            .store(InMemoryStore::new())
    }

    #[tokio::test]
    async fn settings_out_of_range_are_refused_with_their_name() {
        let forever = Duration::MAX;
        let cases = [
            (builder().with_capacity(0), "capacity"),
            (builder().with_idle_ttl(Duration::ZERO), "idle_ttl"),
            (builder().with_idle_ttl(forever), "idle_ttl"),
            (builder().with_capacity_wait(forever), "capacity_wait"),
        ];
        for (builder, name) in cases {
            match builder.build() {
                Err(BuildError::InvalidConfig(message)) => {
                    assert!(message.starts_with(name), "{message}");
                }
                other => panic!("{name}: expected InvalidConfig, got {:?}", other.err()),
            }
        }
        let long = LONGEST_SETTING;
        assert!(builder().with_idle_ttl(long).build().is_ok());
    }
}
