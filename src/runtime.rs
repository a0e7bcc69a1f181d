//! The facade: build a [`Runtime`] once, call it from every request handler.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::call::{CallOptions, Entry, Outcome};
use crate::config::RuntimeConfig;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::registry::{LivePage, LiveQuery, Registry};
use crate::session::{Append, SessionMsg, SessionView, TurnRequest};
use crate::state::{InterruptReason, Seq, SessionRecord, StateDelta};
use crate::stats::{RuntimeStats, TurnTimes};
use crate::store::{Page, PageRequest, Store};
use crate::stream::TurnStream;

mod admission;
mod artifacts;
mod builder;
mod history;
mod memory;
mod ownership;
mod readiness;
mod whole_sessions;

pub use builder::{BuildError, RuntimeBuilder};
pub use history::{MAX_PAGE, MAX_REQUEST_SCAN, MAX_TURN_EVENTS};
pub use ownership::Placement;
pub use readiness::Readiness;

/// Chunks a streaming caller may fall behind by before the agent waits for it.
const STREAM_BUFFER: usize = 64;

/// One actor per live conversation session: call it with a key and an input, get the turn's
/// outcome once it is durable.
///
/// Cheap to clone; every clone is the same runtime. Dropping the last clone stops the idle
/// reaper but not the sessions: call [`Runtime::drain`] or [`Runtime::shutdown`] to stop them
/// (finishing or interrupting their turns, giving their leases back).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("live_sessions", &self.live_sessions())
            .field("draining", &self.is_draining())
            .field("config", self.config())
            .finish_non_exhaustive()
    }
}

struct RuntimeInner {
    registry: Arc<Registry>,
    /// Stops the reaper (and the lease renewer, and the store's prober) when the runtime goes
    /// away.
    shutdown: CancellationToken,
    /// What the prober last learnt of the store, for readiness.
    health: Arc<readiness::StoreHealth>,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// What [`Runtime::drain`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Every session stopped after its last write, and every task of the runtime ended, within
    /// the deadline and the grace after it.
    pub clean: bool,
    /// Sessions still held when the call returned (their final writes did not finish in time).
    pub left: usize,
}

/// How long [`Runtime::drain`] waits, after interrupting what is left at its deadline, for the
/// interrupted turns to be persisted. Interrupts land at the next await point, so this only
/// covers the final writes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    /// The runtime's settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.registry().deps.config
    }

    /// The per-call attributes the runtime's agent acts on ([`crate::Agent::attributes`]).
    pub fn agent_attributes(&self) -> &'static [&'static str] {
        self.registry().deps.agent.attributes()
    }

    /// The names of the tools the runtime's agent offers its model ([`crate::Agent::tool_names`]).
    pub fn agent_tool_names(&self) -> Vec<String> {
        self.registry().deps.agent.tool_names()
    }

    /// The store sessions are persisted in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.registry().deps.store
    }

    /// Runs one turn with the runtime's default options. See [`Runtime::call_with`].
    pub async fn call(&self, key: &SessionKey, input: impl Into<String>) -> Result<Outcome> {
        self.call_with(key, input, CallOptions::default()).await
    }

    /// Sends `input` to the session `key` (activating it if needed) and waits for the answer.
    ///
    /// The message takes its place in the session's FIFO when this future is first polled.
    /// `Ok` means the turn is persisted. An interrupted or superseded turn is an `Ok` outcome,
    /// not an error.
    pub async fn call_with(
        &self,
        key: &SessionKey,
        input: impl Into<String>,
        options: CallOptions,
    ) -> Result<Outcome> {
        self.admit(key, input, options).await?.outcome().await
    }

    /// Like [`Runtime::call_with`], but returns a stream of the chunks the agent emits, ending
    /// with the outcome. Dropping the stream does not cancel the turn unless
    /// [`CallOptions::cancel_on_drop`] is set.
    pub async fn call_streaming(
        &self,
        key: &SessionKey,
        input: impl Into<String>,
        options: CallOptions,
    ) -> Result<TurnStream> {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let cancel_on_drop = options.cancel_on_drop;
        let (request, reply) = self.request(input.into(), &options, Some(tx), false)?;
        let abandon = request.abandon.clone();
        self.registry()
            .submit(key, SessionMsg::Turn(request))
            .await?;
        Ok(TurnStream::new(
            key.clone(),
            rx,
            reply,
            cancel_on_drop.then_some(abandon).flatten(),
        ))
    }

    fn request(
        &self,
        input: String,
        options: &CallOptions,
        stream: Option<mpsc::Sender<crate::call::Streamed>>,
        front: bool,
    ) -> Result<(TurnRequest, oneshot::Receiver<Result<Outcome>>)> {
        let max = self.config().max_input_bytes;
        if input.len() > max {
            return Err(Error::TooLarge {
                len: input.len(),
                max,
            });
        }
        if let Some(id) = &options.request_id {
            crate::call::check_request_id(id).map_err(Error::InvalidRequest)?;
        }
        if let Some(fingerprint) = &options.fingerprint {
            let most = crate::call::MAX_FINGERPRINT_BYTES;
            let fits = !fingerprint.is_empty()
                && fingerprint.len() <= most
                && fingerprint.bytes().all(|b| b.is_ascii_alphanumeric());
            if !fits {
                return Err(Error::InvalidRequest(format!(
                    "a fingerprint is 1 to {most} letters and digits"
                )));
            }
        }
        let most = crate::config::MAX_PRECEDING_ENTRIES;
        if options.preceding.len() > most {
            return Err(Error::InvalidRequest(format!(
                "a message brings at most {most} entries; this one brings {}",
                options.preceding.len()
            )));
        }
        if let Some(entry) = options.preceding.iter().find(|e| e.bytes() > max) {
            return Err(Error::TooLarge {
                len: entry.bytes(),
                max,
            });
        }
        let (reply, rx) = oneshot::channel();
        let request = TurnRequest {
            request_id: options.request_id.clone(),
            memory_user: options.memory_user.clone(),
            preceding: options.preceding.clone(),
            fingerprint: options.fingerprint.clone(),
            existing_only: options.existing_only,
            input,
            policy: options.policy.unwrap_or(self.config().default_policy),
            attributes: options.attributes.clone(),
            deadline: options.deadline,
            // The caller's own token, else one that dropping the stream cancels.
            abandon: options
                .cancellation
                .clone()
                .or_else(|| options.cancel_on_drop.then(CancellationToken::new)),
            stream,
            front,
            reply,
            admitted: Instant::now(),
        };
        Ok((request, rx))
    }

    /// Interrupts the session's running turn at its next await point, without waiting behind
    /// its queue. Returns whether a turn was running; interrupting an idle (or not live) session
    /// does nothing and returns `false`.
    pub fn interrupt(&self, key: &SessionKey) -> bool {
        self.registry().interrupt(key, InterruptReason::Requested)
    }

    /// Interrupts the running turn (if any) and runs `input` as the session's next turn, ahead
    /// of anything already queued; a turn that starts before `input` reaches the session is
    /// interrupted too. Returns the new turn's outcome.
    pub async fn interrupt_with(
        &self,
        key: &SessionKey,
        input: impl Into<String>,
        options: CallOptions,
    ) -> Result<Outcome> {
        let (request, reply) = self.request(input.into(), &options, None, true)?;
        self.registry().interrupt(key, InterruptReason::Requested);
        self.registry()
            .submit(key, SessionMsg::Turn(request))
            .await?;
        reply
            .await
            .map_err(|_| Error::SessionFailed { key: key.clone() })?
    }

    /// Reads a session without activating it: from its actor when live (including turns the
    /// store has not acknowledged yet), else from the store. `None` if it does not exist.
    pub async fn state(&self, key: &SessionKey) -> Result<Option<SessionView>> {
        if let Some(actor) = self.registry().live_actor(key) {
            let (tx, rx) = oneshot::channel();
            if actor.send_message(SessionMsg::Read(tx)).is_ok() {
                if let Ok(mut view) = rx.await {
                    self.apply_defaults(&mut view);
                    return Ok(Some(view));
                }
            }
        }
        let store = self.store();
        let loaded = store
            .load(key, self.config().window)
            .await
            .map_err(|err| Error::store(key, err))?;
        Ok(loaded.record.map(|record: SessionRecord| {
            let mut view = SessionView {
                record,
                events: loaded.events,
                user_state: loaded.user_state,
                app_state: loaded.app_state,
                live: false,
                unsaved: 0,
            };
            self.apply_defaults(&mut view);
            view
        }))
    }

    /// Clears the session's context window (and summary); scoped state is kept. Persisted before
    /// it returns. It does not wait behind the session's queue: turns queued when it arrives
    /// start with the cleared context, and a turn running then is written after the marker.
    pub async fn clear_context(&self, key: &SessionKey) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.registry()
            .submit(key, SessionMsg::ClearContext(tx))
            .await?;
        rx.await
            .map_err(|_| Error::SessionFailed { key: key.clone() })?
    }

    /// Appends `entries` to the session's log without running a turn (creating the session if
    /// it does not exist), and applies `state` — session-scoped keys only, `null` deleting one —
    /// with the last of them (with a note saying so when `entries` is empty). Returns the first
    /// new event's seq once the store acknowledged them.
    ///
    /// Like [`Runtime::clear_context`] it does not wait behind the session's queue: turns that
    /// start after it see the entries; a turn running then is written after them (see
    /// [`Runtime::append_between_turns`] for an append that waits for it).
    pub async fn append(
        &self,
        key: &SessionKey,
        entries: Vec<Entry>,
        state: StateDelta,
    ) -> Result<Seq> {
        self.append_with(key, entries, state, false).await
    }

    /// As [`Runtime::append`], but never written while a turn runs: when one is running, the
    /// append waits until that turn is written (so its state change lands after the turn's
    /// own), then goes ahead of the messages still waiting, whose turns see it. At most 64
    /// appends wait per session; past that one is refused with [`Error::Busy`].
    pub async fn append_between_turns(
        &self,
        key: &SessionKey,
        entries: Vec<Entry>,
        state: StateDelta,
    ) -> Result<Seq> {
        self.append_with(key, entries, state, true).await
    }

    async fn append_with(
        &self,
        key: &SessionKey,
        entries: Vec<Entry>,
        state: StateDelta,
        between_turns: bool,
    ) -> Result<Seq> {
        let max = self.config().max_input_bytes;
        if let Some(entry) = entries.iter().find(|e| e.bytes() > max) {
            return Err(Error::TooLarge {
                len: entry.bytes(),
                max,
            });
        }
        if let Some(scoped) = state.keys().find(|k| k.contains(':')) {
            return Err(Error::InvalidRequest(format!(
                "only session-scoped state can be appended; {scoped:?} has a scope prefix"
            )));
        }
        if entries.is_empty() && state.is_empty() {
            return Err(Error::InvalidRequest("nothing to append".into()));
        }
        let (reply, rx) = oneshot::channel();
        let append = Append {
            entries,
            state,
            between_turns,
            reply,
        };
        self.registry()
            .submit(key, SessionMsg::Append(append))
            .await?;
        rx.await
            .map_err(|_| Error::SessionFailed { key: key.clone() })?
    }

    /// Lists a user's stored sessions (metadata only), paged.
    pub async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page> {
        self.store()
            .list(user_id, page)
            .await
            .map_err(Error::storage)
    }

    /// Stops admitting turns (`Error::Draining`), lets running and queued turns finish until
    /// `deadline`, then interrupts what is left (persisting `shutdown_interrupted`), flushes every
    /// session and stops every actor.
    ///
    /// Compactions still summarizing are cancelled when the drain begins (a stopping session
    /// throws their summary away). Once every session has stopped, it waits, up to 10 s more, for
    /// every task of the runtime to end (sessions' supervisors, claims answered after their
    /// activation timed out, the reaper, the lease renewer), so that nothing but the caller's
    /// own handles holds the store when it returns; not after a drain that left sessions
    /// behind. A read or a delete sent after it returns may still activate a session.
    pub async fn drain(&self, deadline: Duration) -> DrainReport {
        let registry = self.registry();
        registry.begin_drain();
        registry.deps.draining.cancel();
        let mut clean = registry.wait_empty(Instant::now() + deadline).await;
        if !clean {
            registry.force_shutdown();
            clean = registry.wait_empty(Instant::now() + SHUTDOWN_GRACE).await;
        }
        self.inner.shutdown.cancel();
        // A freed slot is not a finished task: a supervising task still holds the registry (and
        // the store) after it frees its slot, and a compaction outlives its actor. Every such
        // task is tracked; once they end, nothing but the caller's clones holds the store.
        // Waited for only after a clean drain: sessions still live past the grace keep their
        // tasks, and the report says so already.
        let tasks = &registry.deps.tasks;
        tasks.close();
        let settled = clean
            && tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
                .await
                .is_ok();
        DrainReport {
            clean: clean && settled,
            left: registry.live_sessions(),
        }
    }

    /// Whether the runtime is draining (or shut down) and refusing new turns.
    pub fn is_draining(&self) -> bool {
        self.registry().is_draining()
    }

    /// Whether the runtime can serve turns now: not while it drains, nor while its store has
    /// not answered [`Readiness::UNANSWERED_PROBES`] probes in a row (see [`Readiness`]). For load
    /// balancers' readiness checks (`GET /readyz`); a process that is not ready is still alive.
    pub fn readiness(&self) -> Readiness {
        if self.is_draining() {
            return Readiness::Draining;
        }
        self.inner.health.readiness()
    }

    /// [`Runtime::drain`] with a zero deadline: interrupts running turns at once, then flushes
    /// and stops.
    pub async fn shutdown(&self) -> DrainReport {
        self.drain(Duration::ZERO).await
    }

    /// Messages sent to a session and not answered yet: its running turn plus those waiting.
    /// Zero for a session that is idle or not live.
    pub fn pending(&self, key: &SessionKey) -> usize {
        self.registry().pending(key)
    }

    /// Whether the session is live in this runtime now (activated, not stopping).
    pub fn is_live(&self, key: &SessionKey) -> bool {
        self.registry().live_actor(key).is_some()
    }

    /// Sessions held now (starting, live or stopping).
    pub fn live_sessions(&self) -> usize {
        self.registry().live_sessions()
    }

    /// The runtime's counters.
    pub fn stats(&self) -> RuntimeStats {
        self.registry().stats()
    }

    /// How long answered turns took, since the runtime was built: subtract an earlier
    /// snapshot ([`TurnTimes::since`]) for an interval's percentiles.
    pub fn turn_times(&self) -> TurnTimes {
        self.registry().deps.counters.turn_times.snapshot()
    }

    /// A page of the live sessions, in key order: what each is doing, its turns, idle time,
    /// unsaved events and size. Copied under the registry's lock without awaiting, so it never
    /// waits behind a turn; a turn waits at most for one page's copy (bounded by
    /// [`LiveQuery::MAX_LIMIT`]).
    pub fn live_page(&self, query: &LiveQuery) -> LivePage {
        self.registry().live_page(query)
    }

    /// Asks a live session to passivate now: what runs and waits finishes, the session is
    /// flushed and its actor stops (the next message activates it again). Returns `false` when
    /// it is not live (absent, still starting, or already stopping).
    pub fn passivate(&self, key: &SessionKey) -> bool {
        self.registry().passivate(key)
    }
}
