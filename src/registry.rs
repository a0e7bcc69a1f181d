//! The registry: the single source of truth for which sessions are live.
//!
//! Its decisions live in [`slots`], a synchronous state machine; this file holds the lock around
//! it and carries out what each decision asks for once the lock is released (spawning a
//! session's supervising task, answering refused callers, waking waiters, recording counters).
//! Every message for a session passes through [`Registry::route`], so the registry always knows
//! where a message must go:
//!
//! - no slot: the session is activated (a supervising task spawns its actor) and the message is
//!   held until the actor is up;
//! - `Starting`: held, in order;
//! - `Live`: pushed into the actor's mailbox (a synchronous, unbounded push; the per-session
//!   bound is enforced here, by the `pending` count);
//! - `Stopping`: held for the *next* activation, which starts only after this one's last store call.
//!
//! Callers that find the runtime full wait in their key's line ([`lines`]); the idle reaper and
//! each session's supervising task are in [`supervisor`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use ractor::ActorRef;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::key::SessionKey;
use crate::session::{SessionDeps, SessionMsg, StopKind};
use crate::state::InterruptReason;
use crate::stats::{Rejection, RuntimeEvent, RuntimeStats};

mod lines;
mod live_page;
mod slots;
mod supervisor;

pub(crate) use lines::Place;
use lines::{until, InLine, Lines, CAPACITY_RECHECK};
pub use live_page::{LivePage, LiveQuery, LiveSession, LiveState};
use slots::{Class, Effects, Limits, Mailbox, Route, SlotMsg, Slots};
pub(crate) use supervisor::{reaper, renewer};

pub(crate) struct Registry {
    inner: Mutex<Inner>,
    pub(crate) deps: Arc<SessionDeps>,
    /// Wakes the reaper when a deadline appears before the one it sleeps until.
    reaper_wake: Notify,
    /// Signalled (to all waiters) whenever a slot is released.
    slot_freed: Notify,
    /// How many times a slot was released (counted before `slot_freed` is signalled).
    slots_freed: AtomicU64,
}

/// Everything behind the registry's one lock.
struct Inner {
    slots: Slots<ActorRef<SessionMsg>>,
    /// Callers waiting for a free slot, one line per key.
    lines: Lines,
}

/// Why a message could not be routed.
pub(crate) enum RouteError {
    /// Refused for good.
    Refused(Error),
    /// The runtime is full and nothing could be evicted yet (or others for this key wait ahead);
    /// the message is handed back (boxed: this rare path should not size every `Result`), with
    /// the caller's place in its key's line, so that the caller may wait for a free slot and try
    /// again.
    AtCapacity(Box<SessionMsg>, Place),
}

impl SlotMsg for SessionMsg {
    fn class(&self) -> Class {
        match self {
            SessionMsg::Turn(_) => Class::Turn,
            SessionMsg::Stop(StopKind::Passivate) => Class::Passivate,
            SessionMsg::Stop(StopKind::Shutdown | StopKind::LeaseLost) => Class::Shutdown,
            SessionMsg::Stop(StopKind::Delete(_)) => Class::Delete,
            _ => Class::Other,
        }
    }

    fn passivate() -> Self {
        SessionMsg::Stop(StopKind::Passivate)
    }

    fn shutdown() -> Self {
        SessionMsg::Stop(StopKind::Shutdown)
    }
}

impl Mailbox for ActorRef<SessionMsg> {
    type Msg = SessionMsg;

    fn push(&self, msg: SessionMsg) -> Result<(), Option<SessionMsg>> {
        self.send_message(msg).map_err(|err| match err {
            ractor::MessagingErr::SendErr(msg) => Some(msg),
            _ => None,
        })
    }
}

impl Registry {
    pub(crate) fn new(deps: Arc<SessionDeps>) -> Arc<Self> {
        let limits = Limits {
            capacity: deps.config.capacity,
            max_queue: deps.config.max_queue,
            idle_ttl: deps.config.idle_ttl,
            epoch: deps.epoch,
        };
        Arc::new(Self {
            inner: Mutex::new(Inner {
                slots: Slots::new(limits),
                lines: Lines::default(),
            }),
            deps,
            reaper_wake: Notify::new(),
            slot_freed: Notify::new(),
            slots_freed: AtomicU64::new(0),
        })
    }

    /// Carries out what a transition asked for. Called with the lock released.
    fn apply(self: &Arc<Self>, fx: Effects<SessionMsg>) {
        for event in fx.events {
            match event {
                // Set under the lock from the count as it is now, so that two transitions
                // applied out of order never leave the gauge on the older count.
                RuntimeEvent::Live(_) => {
                    let inner = self.inner.lock();
                    self.deps
                        .counters
                        .record(RuntimeEvent::Live(inner.slots.len()));
                }
                event => self.deps.counters.record(event),
            }
        }
        if let Some((key, shared)) = fx.spawn {
            let span = tracing::info_span!("session", key = %key);
            self.deps.tasks.spawn(tracing::Instrument::instrument(
                supervisor::run_session(self.clone(), key, shared),
                span,
            ));
        }
        if let Some((error, msgs)) = fx.answer {
            for msg in msgs {
                match msg {
                    SessionMsg::Turn(request) => {
                        let _ = request.reply.send(Err(error.clone()));
                    }
                    SessionMsg::ClearContext(reply) => {
                        let _ = reply.send(Err(error.clone()));
                    }
                    SessionMsg::Append(append) => {
                        let _ = append.reply.send(Err(error.clone()));
                    }
                    // A read's caller sees its reply dropped.
                    _ => {}
                }
            }
        }
        if fx.wake_reaper {
            self.reaper_wake.notify_one();
        }
        if fx.slot_freed {
            self.slots_freed.fetch_add(1, Ordering::SeqCst);
            self.slot_freed.notify_waiters();
        }
    }

    pub(crate) fn stats(&self) -> RuntimeStats {
        let inner = self.inner.lock();
        self.deps
            .counters
            .snapshot(inner.slots.len(), inner.slots.idle_timers())
    }

    pub(crate) fn live_sessions(&self) -> usize {
        self.inner.lock().slots.len()
    }

    /// A bounded page of live sessions, copied under the lock (see [`live_page`]).
    pub(crate) fn live_page(&self, query: &LiveQuery) -> LivePage {
        let stamp = self.deps.stamp();
        self.inner.lock().slots.live_page(query, stamp)
    }

    /// Asks a live session to passivate; returns whether it was live.
    pub(crate) fn passivate(&self, key: &SessionKey) -> bool {
        self.inner.lock().slots.passivate(key)
    }

    /// Routes a message, waiting up to the configured `capacity_wait` for a free slot, behind
    /// any earlier callers of the same key.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        key: &SessionKey,
        msg: SessionMsg,
    ) -> Result<(), Error> {
        let wait = self.deps.config.capacity_wait;
        let deadline = Instant::now().checked_add(wait);
        let mut msg = msg;
        // Leaves the key's line however this call ends, a dropped (cancelled) caller included.
        let mut place = InLine {
            registry: self,
            key,
            first: None,
            queued: false,
        };
        loop {
            // Registering for `slot_freed` takes the `Notify`'s lock, which every caller of the
            // runtime shares: only a caller that found no slot registers, and the count of
            // slots freed tells it whether one was freed between its try and its registering.
            let freed_before = self.slots_freed.load(Ordering::SeqCst);
            match self.route(key, msg, place.first.is_some()) {
                Ok(()) => return Ok(()),
                Err(RouteError::Refused(err)) => return Err(err),
                Err(RouteError::AtCapacity(back, given)) => {
                    msg = *back;
                    match given {
                        Place::None => {}
                        Place::First(guard) => {
                            place.queued = true;
                            place.first = Some(guard);
                        }
                        Place::Behind(line) => {
                            place.queued = true;
                            match until(deadline, line.lock_owned()).await {
                                Some(guard) => {
                                    // Our turn in the line: try again at once.
                                    place.first = Some(guard);
                                    continue;
                                }
                                None => return Err(self.at_capacity()),
                            }
                        }
                    }
                    if wait.is_zero() {
                        return Err(self.at_capacity());
                    }
                    let freed = self.slot_freed.notified();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    if self.slots_freed.load(Ordering::SeqCst) != freed_before {
                        continue;
                    }
                    // A slot frees when a session stops, but a busy session that merely goes
                    // idle frees none until something evicts it: look again now and then.
                    let recheck = Instant::now() + CAPACITY_RECHECK;
                    let wake = deadline.map_or(recheck, |deadline| deadline.min(recheck));
                    let _ = tokio::time::timeout_at(wake, freed).await;
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        return Err(self.at_capacity());
                    }
                }
            }
        }
    }

    /// Counts and returns a refusal for lack of a free slot.
    fn at_capacity(&self) -> Error {
        self.deps
            .counters
            .record(RuntimeEvent::Rejected(Rejection::AtCapacity));
        Error::AtCapacity {
            capacity: self.deps.config.capacity,
        }
    }

    /// Routes one message to its session (see the module docs). Never waits.
    /// `first_in_line`: the caller holds its key's line (see [`Registry::submit`]).
    pub(crate) fn route(
        self: &Arc<Self>,
        key: &SessionKey,
        msg: SessionMsg,
        first_in_line: bool,
    ) -> Result<(), RouteError> {
        let stamp = self.deps.stamp();
        let mut fx = Effects::default();
        let mut inner = self.inner.lock();
        let behind = if first_in_line {
            None
        } else {
            inner.lines.waiting(key)
        };
        let route = inner
            .slots
            .route(key, msg, behind.is_some(), stamp, &mut fx);
        let result = match route {
            Route::Accepted => Ok(()),
            Route::Refused(err) => Err(RouteError::Refused(err)),
            Route::Behind(msg) => Err(RouteError::AtCapacity(
                Box::new(msg),
                Place::Behind(behind.expect("the machine was told so")),
            )),
            Route::AtCapacity(msg) => {
                let place = if first_in_line || self.deps.config.capacity_wait.is_zero() {
                    Place::None
                } else {
                    Place::First(inner.lines.open(key))
                };
                Err(RouteError::AtCapacity(Box::new(msg), place))
            }
        };
        drop(inner);
        self.apply(fx);
        result
    }

    /// The supervising task spawned an actor: deliver what was held and mark it live.
    pub(crate) fn publish(self: &Arc<Self>, key: &SessionKey, actor: ActorRef<SessionMsg>) {
        let mut fx = Effects::default();
        self.inner
            .lock()
            .slots
            .publish(key, actor, Instant::now(), &mut fx);
        self.apply(fx);
    }

    /// The actor could not be spawned (its session could not be loaded): answers everything
    /// held with `error` and returns the deletes, which still need doing.
    pub(crate) fn activation_failed(
        self: &Arc<Self>,
        key: &SessionKey,
        error: &Error,
    ) -> Vec<SessionMsg> {
        let mut fx = Effects::default();
        let deletes = self
            .inner
            .lock()
            .slots
            .activation_failed(key, error, &mut fx);
        self.apply(fx);
        deletes
    }

    /// The actor's task ended. Returns the shared handle of the next activation when messages
    /// are waiting for one.
    pub(crate) fn stopped(
        self: &Arc<Self>,
        key: &SessionKey,
    ) -> Option<Arc<crate::session::SessionShared>> {
        let mut fx = Effects::default();
        let next = self.inner.lock().slots.stopped(key, &mut fx);
        self.apply(fx);
        next
    }

    /// Interrupts a session's running turn without going through its mailbox.
    pub(crate) fn interrupt(self: &Arc<Self>, key: &SessionKey, reason: InterruptReason) -> bool {
        let mut fx = Effects::default();
        let hit = self.inner.lock().slots.interrupt(key, reason, &mut fx);
        self.apply(fx);
        hit
    }

    /// The session's lease is lost: if it is live, it stops at once without another write
    /// (messages arriving meanwhile are held for its next activation).
    pub(crate) fn lease_lost(self: &Arc<Self>, key: &SessionKey) {
        tracing::warn!(%key, "lease lost; the session stops without writing");
        self.inner
            .lock()
            .slots
            .deliver_if_live(key, SessionMsg::Stop(StopKind::LeaseLost));
    }

    /// Messages routed to a session and not answered yet (running, queued or held).
    pub(crate) fn pending(&self, key: &SessionKey) -> usize {
        self.inner.lock().slots.pending(key)
    }

    /// The actor of a live session, for reads that must not activate it.
    pub(crate) fn live_actor(&self, key: &SessionKey) -> Option<ActorRef<SessionMsg>> {
        self.inner.lock().slots.live_actor(key)
    }

    /// Keys of live sessions of one user.
    pub(crate) fn live_keys_of(&self, user_id: &str) -> Vec<SessionKey> {
        self.inner.lock().slots.keys_of(user_id)
    }

    /// Passivates every idle session whose deadline has passed; reschedules the others.
    /// Returns the next deadline.
    pub(crate) fn reap(self: &Arc<Self>, now: Instant) -> Option<Instant> {
        let mut fx = Effects::default();
        let next = self.inner.lock().slots.reap(now, &mut fx);
        self.apply(fx);
        next
    }

    /// Whether `begin_drain` was called.
    pub(crate) fn is_draining(&self) -> bool {
        self.inner.lock().slots.is_draining()
    }

    /// Stops admitting turns and asks every session to passivate once its work is done.
    pub(crate) fn begin_drain(&self) {
        self.inner.lock().slots.begin_drain();
    }

    /// Interrupts every running turn (they persist `shutdown_interrupted`) and refuses whatever
    /// still waits.
    pub(crate) fn force_shutdown(self: &Arc<Self>) {
        let mut fx = Effects::default();
        self.inner.lock().slots.force_shutdown(&mut fx);
        self.apply(fx);
    }

    /// Waits until no slot is left or `deadline` passes; returns whether none is left.
    pub(crate) async fn wait_empty(&self, deadline: Instant) -> bool {
        loop {
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.inner.lock().slots.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return self.inner.lock().slots.is_empty();
            }
        }
    }

    pub(crate) fn reaper_wake(&self) -> &Notify {
        &self.reaper_wake
    }
}
