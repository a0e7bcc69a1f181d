//! The session actor: one per live session, the only owner of that session's state.
//!
//! Its mailbox serialises everything that happens to the session. A turn runs as a child task,
//! so the actor keeps reading its mailbox while the agent works: a newer message can supersede
//! the running turn, and the turn's result comes back as a [`SessionMsg::Finished`] message.
//! Interrupts do not go through the mailbox at all: they reach the running turn through the
//! [`SessionShared`] handle the registry holds next to the actor.
//!
//! # Layout
//!
//! - `queue`: the overlap policies, pure: what becomes of an arriving message, what runs next.
//! - `task`: running one turn as a child task, and the events a turn writes.
//! - `journal`: what the store acknowledged of the session (head, state, window) and the writes
//!   that extend it; nothing unacknowledged is ever shown, answered from or built on.
//! - `live`: the session's state and the actor's steps (start, finish, answer, stop), with
//!   `live/compaction`, `live/replay` (request ids) and `live/stop`.
//! - `ownership`: the leases of live sessions when several processes share the store.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, Attributes};
use crate::call::{Outcome, OverlapPolicy};
use crate::config::RuntimeConfig;
use crate::context::Summarizer;
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{Event, InterruptReason, SessionRecord, StateMap};
use crate::stats::Counters;
use crate::store::{Store, StoreError};

mod journal;
mod live;
mod ownership;
mod queue;
mod task;

pub(crate) use live::ingest_stored;
use live::Live;
pub(crate) use ownership::LeaseKeeper;
pub(crate) use task::TaskResult;

/// Wall-clock milliseconds for event and head timestamps (never used for ordering or safety).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What every session of one runtime shares.
pub(crate) struct SessionDeps {
    pub store: Arc<dyn Store>,
    pub agent: Arc<dyn Agent>,
    pub summarizer: Option<Arc<dyn Summarizer>>,
    pub config: RuntimeConfig,
    /// Runtime-wide turn slots, when `max_concurrent_turns` is set.
    pub turn_permits: Option<Arc<Semaphore>>,
    /// Zero point of [`SessionShared::last_active`].
    pub epoch: Instant,
    /// The runtime's counters: the registry and every session record into the same ones.
    pub counters: Counters,
    /// The leases of live sessions, when the runtime shares its store with other processes.
    pub keeper: Option<Arc<LeaseKeeper>>,
    // --- artifacts and declared state keys ---
    /// Where turns save artifacts, if anywhere.
    pub artifacts: Option<Arc<dyn crate::artifact::ArtifactStore>>,
    /// Declared state keys, if any.
    pub state_keys: Option<Arc<crate::state_keys::StateKeys>>,
    /// Memory across sessions, when the runtime has a memory store.
    pub memory: Option<MemoryDeps>,
    /// Every task that may hold these deps (supervising tasks, compactions, claims, the reaper
    /// and renewer): a drain waits for all of them, so the store is let go of when it returns.
    pub tasks: tokio_util::task::TaskTracker,
    /// Cancelled when the runtime starts to drain: work whose result a stopping session would
    /// throw away (a compaction's summary) stops then instead of holding the drain up.
    pub draining: tokio_util::sync::CancellationToken,
    /// The requests turns sent their model, kept for reading within a budget of bytes.
    pub sent_requests: Arc<crate::agent::SentRequestLog>,
}

/// A runtime's memory store and how it is used.
pub(crate) struct MemoryDeps {
    pub store: Arc<dyn crate::memory::MemoryStore>,
    pub options: crate::memory::MemoryOptions,
}

impl SessionDeps {
    /// Time since `epoch`, in nanoseconds, for lock-free activity stamps.
    pub(crate) fn stamp(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The part of a session that the registry and the runtime reach without the mailbox.
#[derive(Default)]
pub(crate) struct SessionShared {
    /// Turn messages routed to the actor and not yet answered. Zero means idle: nothing running,
    /// nothing queued. Incremented by the registry (under its lock) and decremented by the actor
    /// as it answers.
    pub pending: AtomicUsize,
    /// A write of the session's is on its way to the store.
    pub dirty: AtomicBool,
    /// The running turn, so that `interrupt` reaches it without waiting behind the mailbox.
    pub current: Mutex<Option<Arc<TurnControl>>>,
    /// When the session last did something, as a [`SessionDeps::stamp`].
    pub last_active: AtomicU64,
    /// Read by the live-sessions snapshot only (`Runtime::live_page`), published by the actor
    /// as it answers and saves; see [`LiveGauges`].
    pub gauges: LiveGauges,
}

/// What an operator sees of a live session beyond its state, published by its actor with
/// relaxed stores (a snapshot may be a turn behind; nothing decides on these).
#[derive(Default)]
pub(crate) struct LiveGauges {
    /// Turns the session ran (its head's `stats.turns`).
    pub turns: AtomicU64,
    /// Events of the write on its way to the store, or of a write whose outcome is unknown
    /// (held apart until read back); none are shown or built on.
    pub unsaved: AtomicUsize,
    /// Approximate bytes of the session's serialised events (its head's `stats.bytes`).
    pub bytes: AtomicU64,
}

impl LiveGauges {
    /// Publishes the head's totals.
    pub(crate) fn publish(&self, record: &crate::state::SessionRecord) {
        self.turns.store(record.stats.turns, Ordering::Relaxed);
        self.bytes.store(record.stats.bytes, Ordering::Relaxed);
    }
}

impl SessionShared {
    /// Whether the session may be passivated now: nothing running or queued, no write on its way.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0 && !self.dirty.load(Ordering::Acquire)
    }

    /// Interrupts the running turn, if any. Returns whether one was running.
    pub(crate) fn interrupt(&self, reason: InterruptReason) -> bool {
        match self.current.lock().as_ref() {
            Some(control) => {
                control.interrupt(reason);
                true
            }
            None => false,
        }
    }
}

/// Cancels one running turn and remembers why.
#[derive(Default)]
pub(crate) struct TurnControl {
    pub token: CancellationToken,
    /// The first reason given wins; later interrupts of the same turn change nothing.
    reason: Mutex<Option<InterruptReason>>,
}

impl TurnControl {
    pub(crate) fn with_token(token: CancellationToken) -> Self {
        Self {
            token,
            reason: Mutex::new(None),
        }
    }

    pub(crate) fn interrupt(&self, reason: InterruptReason) {
        self.reason.lock().get_or_insert(reason);
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> InterruptReason {
        self.reason.lock().unwrap_or(InterruptReason::Requested)
    }
}

/// A message for the session actor.
pub(crate) enum SessionMsg {
    /// Run (or queue, supersede, reject, merge) a turn.
    Turn(TurnRequest),
    /// A turn's child task ended.
    Finished(TurnFinished),
    /// Read the session as it is in memory.
    Read(oneshot::Sender<SessionView>),
    /// Clear the context window (keeps scoped state).
    ClearContext(oneshot::Sender<Result<(), Error>>),
    /// Append entries (and a change to session state) without running a turn; answers the
    /// first new event's seq.
    Append(Append),
    /// A compaction task finished: the summary of events up to `through_seq`.
    Compacted {
        through_seq: crate::state::Seq,
        summary: Result<String, String>,
    },
    /// Finish up and stop. The registry marks the session stopping before sending this, so no
    /// turn arrives after it.
    Stop(StopKind),
}

/// What [`SessionMsg::Append`] adds.
pub(crate) struct Append {
    pub entries: Vec<crate::call::Entry>,
    /// Session-scoped keys only (the runtime checks).
    pub state: crate::state::StateDelta,
    /// Wait for the running turn to be written, rather than be written while it runs.
    pub between_turns: bool,
    pub reply: oneshot::Sender<Result<crate::state::Seq, Error>>,
}

/// How a session stops.
pub(crate) enum StopKind {
    /// Let running and queued turns finish, flush, stop.
    Passivate,
    /// Interrupt the running turn (persisting `shutdown_interrupted`), refuse queued ones, flush,
    /// stop.
    Shutdown,
    /// Interrupt and refuse everything, delete the session from the store, stop.
    Delete(oneshot::Sender<Result<bool, Error>>),
    /// The session's lease is lost (another process may own it now): interrupt the running
    /// turn, refuse what waits, and stop without another write.
    LeaseLost,
}

/// One message from a caller.
pub(crate) struct TurnRequest {
    pub input: String,
    pub policy: OverlapPolicy,
    pub attributes: Attributes,
    pub deadline: Option<Duration>,
    /// Streamed chunks go here, when the caller asked for a stream.
    pub stream: Option<mpsc::Sender<crate::call::Streamed>>,
    /// Run before anything already queued (`interrupt_with`).
    pub front: bool,
    /// Cancelled when a streaming caller that asked for `cancel_on_drop` goes away.
    pub abandon: Option<CancellationToken>,
    pub reply: oneshot::Sender<Result<Outcome, Error>>,
    /// When the call entered the runtime, for latency metrics.
    pub admitted: Instant,
    /// The caller's request id (see `CallOptions::request_id`).
    pub request_id: Option<String>,
    /// Whose memory the turn recalls from (see `CallOptions::memory_user`).
    pub memory_user: Option<String>,
    /// Entries written just before the message (see `CallOptions::preceding`).
    pub preceding: Vec<crate::call::Entry>,
    /// What the request said, digested (see `CallOptions::fingerprint`).
    pub fingerprint: Option<String>,
    /// Refuse the message when the session does not exist (see `CallOptions::existing_only`).
    pub existing_only: bool,
}

impl TurnRequest {
    /// The message as its turn's events are written.
    pub(crate) fn message(&self) -> task::Message<'_> {
        task::Message {
            preceding: &self.preceding,
            text: &self.input,
            request_id: self.stored_request_id(),
        }
    }

    /// The request id as its events keep it: followed by the fingerprint, when there is one.
    pub(crate) fn stored_request_id(&self) -> Option<String> {
        let id = self.request_id.as_deref()?;
        Some(match &self.fingerprint {
            Some(fingerprint) => format!("{id} {fingerprint}"),
            None => id.to_owned(),
        })
    }
}

/// A turn's child task reporting back.
pub(crate) struct TurnFinished {
    pub turn_id: u64,
    pub result: TaskResult,
}

/// A session as seen from outside: its head, its context window and the shared state it sees.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionView {
    /// The head: version, counters, session state, summary.
    pub record: SessionRecord,
    /// The newest events held in memory (or loaded), oldest first.
    pub events: Vec<Event>,
    /// The user's `user:` state.
    pub user_state: StateMap,
    /// The application's `app:` state.
    pub app_state: StateMap,
    /// Whether the session was live (activated) when read.
    pub live: bool,
    /// Events of a write whose outcome is unknown (a timeout, a lost connection), held apart
    /// until the store is read back: they are not among `events` and nothing builds on them.
    /// Zero otherwise: a session never holds events the store refused.
    pub unsaved: usize,
}

/// The ractor actor type; all state lives in [`Live`].
pub(crate) struct SessionActor;

/// What a session actor starts from.
pub(crate) struct SessionArgs {
    pub key: SessionKey,
    pub deps: Arc<SessionDeps>,
    pub shared: Arc<SessionShared>,
    /// The session as read with its lease, when the store reads it with the claim: the actor
    /// then loads nothing.
    pub loaded: Option<crate::store::LoadedSession>,
    /// When the claim of the session's lease was sent and how long it took (with the read, where
    /// the store reads with the claim): the first turn's `load_ms` counts it.
    pub claimed: Option<(tokio::time::Instant, std::time::Duration)>,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = Live;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<Live, ActorProcessingErr> {
        Ok(Live::load(args).await?)
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        live: &mut Live,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: ractor keeps this handler's future inline in every actor's processing loop, so
        // its size would be paid by every idle session; one allocation per message instead.
        Box::pin(handle_message(myself, msg, live)).await
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SessionMsg>,
        live: &mut Live,
    ) -> Result<(), ActorProcessingErr> {
        live.release_lease().await;
        Ok(())
    }
}

/// What a session does with a message (see [`SessionActor`]).
async fn handle_message(
    myself: ActorRef<SessionMsg>,
    msg: SessionMsg,
    live: &mut Live,
) -> Result<(), ActorProcessingErr> {
    // The futures that await the store are boxed too, so that this one stays small: it is
    // allocated for every message.
    match msg {
        SessionMsg::Turn(request) => {
            // The common case stays synchronous: no future is made unless the journal must
            // look at the store first (a write whose outcome is unknown, a reload that failed).
            let request = if live.is_settled() {
                Some(request)
            } else {
                Box::pin(live.settle_for(request)).await
            };
            // A message with a request id may be a retry: answered without running.
            let request = match request {
                Some(request) if request.request_id.is_some() => {
                    Box::pin(live.replay(request)).await
                }
                other => other,
            };
            if let Some(request) = request {
                live.admit(request, &myself);
            }
        }
        SessionMsg::Finished(finished) => {
            Box::pin(live.finish(finished)).await;
            live.maybe_compact(&myself);
        }
        SessionMsg::Compacted {
            through_seq,
            summary,
        } => Box::pin(live.compacted(through_seq, summary)).await,
        SessionMsg::Read(reply) => {
            let _ = reply.send(live.view());
        }
        SessionMsg::ClearContext(reply) => {
            let _ = reply.send(Box::pin(live.clear_context()).await);
        }
        SessionMsg::Append(append) if append.between_turns && live.is_running() => {
            live.defer(append);
        }
        SessionMsg::Append(append) => {
            let reply = Box::pin(live.append(append.entries, append.state)).await;
            let _ = append.reply.send(reply);
        }
        SessionMsg::Stop(kind) => live.begin_stop(kind),
    }
    // Turns that finish in their first poll are recorded here, and may start the next one.
    loop {
        if let Some(done) = live.take_immediate() {
            Box::pin(live.finish(done)).await;
            live.maybe_compact(&myself);
        }
        // Appends that waited for the turn just written go before the next turn starts.
        if live.has_deferred() {
            Box::pin(live.apply_deferred()).await;
        }
        if !live.is_settled() {
            Box::pin(live.settle_before_turns()).await;
        }
        if live.advance(&myself) {
            Box::pin(live.finish_stop()).await;
            myself.stop(None);
            return Ok(());
        }
        if !live.has_immediate() {
            return Ok(());
        }
    }
}

/// Recovers the typed store error from a failed `pre_start`.
pub(crate) fn activation_error(key: &SessionKey, err: ractor::SpawnErr) -> Error {
    refused_activation(key, spawn_store_error(err))
}

/// The store error inside a failed spawn.
fn spawn_store_error(err: ractor::SpawnErr) -> StoreError {
    match err {
        ractor::SpawnErr::StartupFailed(inner) => match inner.downcast::<StoreError>() {
            Ok(store) => *store,
            Err(other) => StoreError::Unavailable {
                backend: "session",
                detail: other.to_string(),
            },
        },
        other => StoreError::Unavailable {
            backend: "session",
            detail: other.to_string(),
        },
    }
}

/// The caller's error for an activation the store refused: `OwnedElsewhere` when another
/// process holds the session's lease, `Activation` otherwise.
pub(crate) fn refused_activation(key: &SessionKey, source: StoreError) -> Error {
    match source {
        StoreError::NotOwner {
            owner: Some(owner), ..
        } => Error::OwnedElsewhere {
            key: key.clone(),
            owner,
        },
        source => Error::Activation {
            key: key.clone(),
            source: Arc::new(source),
        },
    }
}

/// A session that cannot be loaded (corrupt, newer schema) can still be deleted: straight from
/// the store, since no actor owns it. Answers the deletes among `msgs`; ignores the rest.
pub(crate) async fn delete_unloadable(deps: &SessionDeps, key: &SessionKey, msgs: Vec<SessionMsg>) {
    for msg in msgs {
        if let SessionMsg::Stop(StopKind::Delete(reply)) = msg {
            let result = deps
                .store
                .delete(key)
                .await
                .map_err(|err| Error::store(key, err));
            let _ = reply.send(result);
        }
    }
}
