//! The registry: the single source of truth for which sessions are live.
//!
//! Every message for a session passes through [`Registry::route`], under one lock, so that the
//! registry always knows where a message must go:
//!
//! - no slot: the session is activated (a lifecycle task spawns its actor) and the message is
//!   held until the actor is up;
//! - `Starting`: held, in order;
//! - `Live`: sent to the actor's mailbox (a synchronous, unbounded send; the per-session bound is
//!   enforced here, by the `pending` count);
//! - `Stopping`: held for the *next* activation, which starts only after this one's final flush.
//!
//! Whenever a `Stop` is sent to an actor its slot becomes `Stopping` in the same critical
//! section, so no message can slip into a mailbox that is about to close.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lru::LruCache;
use parking_lot::Mutex;
use ractor::ActorRef;
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

use crate::error::Error;
use crate::key::SessionKey;
use crate::session::{SessionDeps, SessionMsg, SessionShared, StopKind};
use crate::state::InterruptReason;
use crate::stats::{Counters, RuntimeStats};

mod lifecycle;

pub(crate) use lifecycle::reaper;

/// How often a call waiting for a free slot looks again (and so tries to evict a session that
/// went idle meanwhile). Short beside a turn, long beside the cost of one look.
const CAPACITY_RECHECK: Duration = Duration::from_millis(100);

/// At most this many least-recently-used sessions are examined when looking for one to evict,
/// so that a runtime full of busy sessions does not scan them all on every activation.
const EVICTION_SCAN: usize = 64;

pub(crate) struct Registry {
    inner: Mutex<Inner>,
    pub(crate) deps: Arc<SessionDeps>,
    pub(crate) counters: Counters,
    /// Wakes the reaper when a deadline appears before the one it sleeps until.
    reaper_wake: Notify,
    /// Signalled (to all waiters) whenever a slot is released.
    slot_freed: Notify,
}

struct Inner {
    /// Slots in least-recently-used order (a call promotes its session).
    slots: LruCache<SessionKey, Slot>,
    /// Idle deadlines of live sessions, soonest first; exactly one per `Live` slot.
    deadlines: BTreeSet<(Instant, SessionKey)>,
    draining: bool,
    /// The drain's deadline passed ([`Registry::force_shutdown`]): nothing waiting runs any more.
    forced: bool,
    /// Keys whose callers wait for a free slot, each with its line (see [`Registry::submit`]).
    /// An entry lives only while somebody waits in it.
    lines: HashMap<SessionKey, Line>,
}

/// The callers of one key that wait for a free slot, in arrival order: tokio's mutex hands its
/// lock over first come, first served, so holding it is being first in line.
type Line = Arc<tokio::sync::Mutex<()>>;

/// A caller's stay in its key's line: on drop it gives up its place and, if it was the last
/// one there, removes the line.
struct InLine<'a> {
    registry: &'a Registry,
    key: &'a SessionKey,
    /// Held while first in line.
    first: Option<OwnedMutexGuard<()>>,
    /// Whether the caller ever stood in the line.
    queued: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.queued {
            // The guard holds the line too: release it before counting who is left.
            self.first = None;
            self.registry.leave_line(self.key);
        }
    }
}

/// Where a caller refused for capacity stands.
pub(crate) enum Place {
    /// No wait is configured: there is no line.
    None,
    /// First in its key's line (holds the line's lock).
    First(OwnedMutexGuard<()>),
    /// Others for this key wait ahead of it: it queues behind them.
    Behind(Line),
}

enum Slot {
    /// The actor is being spawned (and is loading); messages wait here, in order.
    Starting {
        shared: Arc<SessionShared>,
        held: VecDeque<SessionMsg>,
    },
    Live {
        shared: Arc<SessionShared>,
        actor: ActorRef<SessionMsg>,
        /// This session's entry in `Inner::deadlines`.
        deadline: Instant,
    },
    /// The actor was asked to stop. Messages wait here for the next activation, whose pending
    /// count is `next` (the stopping actor keeps its own).
    Stopping {
        shared: Arc<SessionShared>,
        actor: ActorRef<SessionMsg>,
        next: Arc<SessionShared>,
        held: VecDeque<SessionMsg>,
    },
}

/// Why a message could not be routed.
pub(crate) enum RouteError {
    /// Refused for good.
    Refused(Error),
    /// The runtime is full and nothing could be evicted yet (or others for this key wait ahead);
    /// the message is handed back, with the caller's place in its key's line, so that the
    /// caller may wait for a free slot and try again.
    AtCapacity(SessionMsg, Place),
}

impl Registry {
    pub fn new(deps: Arc<SessionDeps>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                slots: LruCache::unbounded(),
                deadlines: BTreeSet::new(),
                draining: false,
                forced: false,
                lines: HashMap::new(),
            }),
            deps,
            counters: Counters::default(),
            reaper_wake: Notify::new(),
            slot_freed: Notify::new(),
        })
    }

    pub fn stats(&self) -> RuntimeStats {
        let inner = self.inner.lock();
        self.counters
            .snapshot(inner.slots.len(), inner.deadlines.len())
    }

    pub fn live_sessions(&self) -> usize {
        self.inner.lock().slots.len()
    }

    /// Routes a message, waiting up to the configured `capacity_wait` for a free slot.
    ///
    /// Callers of one key that have to wait keep their order: the first waits for a slot while
    /// later ones (and any newcomer for that key) queue behind it in the key's line, so a slot
    /// that frees up cannot let a later message of a session start before an earlier one.
    pub async fn submit(self: &Arc<Self>, key: &SessionKey, msg: SessionMsg) -> Result<(), Error> {
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
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.route(key, msg, place.first.is_some()) {
                Ok(()) => return Ok(()),
                Err(RouteError::Refused(err)) => return Err(err),
                Err(RouteError::AtCapacity(back, given)) => {
                    msg = back;
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
        Counters::bump(&self.counters.rejected_capacity);
        metrics::counter!("turnstile_rejections_total", "reason" => "at_capacity").increment(1);
        Error::AtCapacity {
            capacity: self.deps.config.capacity,
        }
    }

    /// Forgets `key`'s line once nobody waits in it any more.
    fn leave_line(&self, key: &SessionKey) {
        let mut inner = self.inner.lock();
        if inner
            .lines
            .get(key)
            .is_some_and(|line| Arc::strong_count(line) == 1)
        {
            inner.lines.remove(key);
        }
    }

    /// Routes one message to its session (see the module docs). Never waits.
    /// `first_in_line`: the caller holds its key's line (see [`Registry::submit`]).
    pub fn route(
        self: &Arc<Self>,
        key: &SessionKey,
        msg: SessionMsg,
        first_in_line: bool,
    ) -> Result<(), RouteError> {
        let is_turn = matches!(msg, SessionMsg::Turn(_));
        let mut inner = self.inner.lock();
        if (inner.draining && is_turn) || inner.forced {
            Counters::bump(&self.counters.rejected_draining);
            metrics::counter!("turnstile_rejections_total", "reason" => "draining").increment(1);
            return Err(RouteError::Refused(Error::Draining));
        }
        if !first_in_line && !inner.lines.is_empty() {
            if let Some(line) = inner.lines.get(key) {
                return Err(RouteError::AtCapacity(msg, Place::Behind(line.clone())));
            }
        }
        if inner.slots.contains(key) {
            return self.route_existing(&mut inner, key, msg, is_turn);
        }
        if inner.slots.len() >= self.deps.config.capacity {
            self.evict_lru(&mut inner);
            let place = if first_in_line || self.deps.config.capacity_wait.is_zero() {
                Place::None
            } else {
                let line = Line::default();
                let guard = line
                    .clone()
                    .try_lock_owned()
                    .expect("a new line's lock is free");
                inner.lines.insert(key.clone(), line);
                Place::First(guard)
            };
            return Err(RouteError::AtCapacity(msg, place));
        }
        let shared = Arc::new(SessionShared::default());
        if is_turn {
            shared.pending.store(1, Ordering::Release);
        }
        let stops = matches!(msg, SessionMsg::Stop(_));
        let mut held = VecDeque::from([msg]);
        if inner.draining && !stops {
            // Only a read, clear or delete activates a session during a drain: it does that one
            // thing and stops, or the drain would wait for its idle TTL.
            held.push_back(SessionMsg::Stop(StopKind::Passivate));
        }
        inner.slots.put(
            key.clone(),
            Slot::Starting {
                shared: shared.clone(),
                held,
            },
        );
        let live = inner.slots.len();
        drop(inner);
        self.counters
            .peak_live
            .fetch_max(live as u64, Ordering::Relaxed);
        metrics::gauge!("turnstile_live_sessions").set(live as f64);
        let span = tracing::info_span!("session", key = %key);
        tokio::spawn(tracing::Instrument::instrument(
            lifecycle::run_session(self.clone(), key.clone(), shared),
            span,
        ));
        Ok(())
    }

    fn route_existing(
        &self,
        inner: &mut Inner,
        key: &SessionKey,
        msg: SessionMsg,
        is_turn: bool,
    ) -> Result<(), RouteError> {
        let max_pending = self.deps.config.max_queue + 1;
        let slot = inner.slots.get_mut(key).expect("checked by the caller");
        let shared = match slot {
            Slot::Starting { shared, .. } | Slot::Live { shared, .. } => shared,
            Slot::Stopping { next, .. } => next,
        };
        if is_turn {
            let pending = shared.pending.load(Ordering::Acquire);
            if pending >= max_pending {
                Counters::bump(&self.counters.rejected_overloaded);
                metrics::counter!("turnstile_rejections_total", "reason" => "overloaded")
                    .increment(1);
                return Err(RouteError::Refused(Error::Overloaded {
                    key: key.clone(),
                    queued: pending.saturating_sub(1),
                }));
            }
            let depth = shared.pending.fetch_add(1, Ordering::AcqRel);
            // How many messages this one found ahead of it: the session's queue depth.
            metrics::histogram!("turnstile_queue_depth").record(depth as f64);
            shared
                .last_active
                .store(self.deps.stamp(), Ordering::Release);
        }
        match slot {
            Slot::Starting { held, .. } | Slot::Stopping { held, .. } => held.push_back(msg),
            Slot::Live { .. } => self.send_to_live(inner, key, msg),
        }
        Ok(())
    }

    /// Sends to a live actor; a `Stop` turns the slot into `Stopping` in the same step. If the
    /// actor's mailbox is already closed (it died), the message is held for the next activation.
    fn send_to_live(&self, inner: &mut Inner, key: &SessionKey, msg: SessionMsg) {
        let is_stop = matches!(msg, SessionMsg::Stop(_));
        let Some(Slot::Live { actor, .. }) = inner.slots.peek(key) else {
            return;
        };
        match actor.send_message(msg) {
            Ok(()) if !is_stop => {}
            Ok(()) => self.mark_stopping(inner, key, VecDeque::new()),
            Err(err) => {
                let held = match err {
                    ractor::MessagingErr::SendErr(msg) => VecDeque::from([msg]),
                    _ => VecDeque::new(),
                };
                self.mark_stopping(inner, key, held);
            }
        }
    }

    /// Turns a `Live` slot into `Stopping`, moving turn counts of `held` messages to the next
    /// activation.
    fn mark_stopping(&self, inner: &mut Inner, key: &SessionKey, held: VecDeque<SessionMsg>) {
        let Some(slot) = inner.slots.peek_mut(key) else {
            return;
        };
        let Slot::Live {
            shared,
            actor,
            deadline,
        } = slot
        else {
            return;
        };
        let (shared, actor, deadline) = (shared.clone(), actor.clone(), *deadline);
        let next = Arc::new(SessionShared::default());
        let moved = held
            .iter()
            .filter(|m| matches!(m, SessionMsg::Turn(_)))
            .count();
        shared.pending.fetch_sub(moved, Ordering::AcqRel);
        next.pending.store(moved, Ordering::Release);
        *slot = Slot::Stopping {
            shared,
            actor,
            next,
            held,
        };
        inner.deadlines.remove(&(deadline, key.clone()));
    }

    /// Asks the least recently used idle session (if any among the oldest few) to passivate.
    fn evict_lru(&self, inner: &mut Inner) {
        let victim = inner
            .slots
            .iter()
            .rev()
            .take(EVICTION_SCAN)
            .find(|(_, slot)| matches!(slot, Slot::Live { shared, .. } if shared.is_idle()))
            .map(|(key, _)| key.clone());
        if let Some(key) = victim {
            Counters::bump(&self.counters.evictions_lru);
            metrics::counter!("turnstile_evictions_total", "reason" => "lru").increment(1);
            self.send_to_live(inner, &key, SessionMsg::Stop(StopKind::Passivate));
        }
    }

    /// The lifecycle task spawned an actor: deliver what was held and mark it live.
    pub(crate) fn publish(&self, key: &SessionKey, actor: ActorRef<SessionMsg>) {
        let mut inner = self.inner.lock();
        let Some(Slot::Starting { shared, held }) = inner.slots.pop(key) else {
            unreachable!("only the lifecycle task of a Starting slot publishes");
        };
        let deadline = Instant::now() + self.deps.config.idle_ttl;
        let wake = inner
            .deadlines
            .first()
            .is_none_or(|(first, _)| deadline < *first);
        inner.deadlines.insert((deadline, key.clone()));
        inner.slots.push(
            key.clone(),
            Slot::Live {
                shared,
                actor,
                deadline,
            },
        );
        Counters::bump(&self.counters.activations);
        metrics::counter!("turnstile_activations_total").increment(1);
        let mut held = held;
        while let Some(msg) = held.pop_front() {
            if matches!(msg, SessionMsg::Stop(_)) {
                // Whatever came after the stop waits for the next activation, and its turn count
                // moves with it.
                let sent = match inner.slots.peek(key) {
                    Some(Slot::Live { actor, .. }) => actor.send_message(msg).is_ok(),
                    _ => false,
                };
                if sent {
                    self.mark_stopping(&mut inner, key, std::mem::take(&mut held));
                }
                break;
            }
            self.send_to_live(&mut inner, key, msg);
            if !matches!(inner.slots.peek(key), Some(Slot::Live { .. })) {
                // The actor died at once; `send_to_live` made the slot `Stopping`.
                if let Some(Slot::Stopping {
                    held: rest,
                    next,
                    shared,
                    ..
                }) = inner.slots.peek_mut(key)
                {
                    let moved = held
                        .iter()
                        .filter(|m| matches!(m, SessionMsg::Turn(_)))
                        .count();
                    shared.pending.fetch_sub(moved, Ordering::AcqRel);
                    next.pending.fetch_add(moved, Ordering::AcqRel);
                    rest.extend(held.drain(..));
                }
                break;
            }
        }
        drop(inner);
        if wake {
            self.reaper_wake.notify_one();
        }
    }

    /// The actor could not be spawned (its session could not be loaded): answer everything held.
    pub(crate) fn activation_failed(&self, key: &SessionKey, error: Error) -> Vec<SessionMsg> {
        let mut inner = self.inner.lock();
        let held = match inner.slots.pop(key) {
            Some(Slot::Starting { held, .. }) => held,
            _ => VecDeque::new(),
        };
        Counters::bump(&self.counters.activation_failures);
        metrics::gauge!("turnstile_live_sessions").set(inner.slots.len() as f64);
        drop(inner);
        self.slot_freed.notify_waiters();
        answer_all(held, &error).into()
    }

    /// The actor's task ended. Returns the shared handle of the next activation when messages
    /// are waiting for one.
    pub(crate) fn stopped(&self, key: &SessionKey) -> Option<Arc<SessionShared>> {
        let mut inner = self.inner.lock();
        Counters::bump(&self.counters.stops);
        let next = match inner.slots.peek_mut(key) {
            Some(Slot::Stopping { next, held, .. }) if !held.is_empty() => {
                let next = next.clone();
                let mut held = std::mem::take(held);
                // A bare passivation or shutdown left from the activation that just stopped
                // asks nothing of the next one (the drain adds its own below).
                held.retain(|m| {
                    !matches!(
                        m,
                        SessionMsg::Stop(StopKind::Passivate | StopKind::Shutdown)
                    )
                });
                if held.is_empty() {
                    inner.slots.pop(key);
                    metrics::gauge!("turnstile_live_sessions").set(inner.slots.len() as f64);
                    drop(inner);
                    self.slot_freed.notify_waiters();
                    return None;
                }
                if inner.forced {
                    // Past the drain's deadline nothing that waited runs: it is answered
                    // `Draining`, and only deletes still need the session.
                    let turns = count_turns(&held);
                    held = answer_all(held, &Error::Draining);
                    next.pending.fetch_sub(turns, Ordering::AcqRel);
                    if held.is_empty() {
                        inner.slots.pop(key);
                        metrics::gauge!("turnstile_live_sessions").set(inner.slots.len() as f64);
                        drop(inner);
                        self.slot_freed.notify_waiters();
                        return None;
                    }
                } else if inner.draining && !ends_in_stop(&held) {
                    // Admitted before the drain: they run, then this activation stops too.
                    held.push_back(SessionMsg::Stop(StopKind::Passivate));
                }
                let slot = inner.slots.peek_mut(key).expect("peeked above");
                *slot = Slot::Starting {
                    shared: next.clone(),
                    held,
                };
                Some(next)
            }
            Some(Slot::Live { deadline, .. }) => {
                // Stopped without being asked: its mailbox is gone, and with it any waiting
                // callers' replies (they see `SessionFailed`).
                Counters::bump(&self.counters.unexpected_stops);
                let deadline = *deadline;
                inner.deadlines.remove(&(deadline, key.clone()));
                inner.slots.pop(key);
                None
            }
            _ => {
                inner.slots.pop(key);
                None
            }
        };
        metrics::gauge!("turnstile_live_sessions").set(inner.slots.len() as f64);
        drop(inner);
        if next.is_none() {
            self.slot_freed.notify_waiters();
        }
        next
    }

    /// Interrupts a session's running turn without going through its mailbox.
    pub fn interrupt(&self, key: &SessionKey, reason: InterruptReason) -> bool {
        let inner = self.inner.lock();
        let hit = match inner.slots.peek(key) {
            Some(Slot::Live { shared, .. } | Slot::Stopping { shared, .. }) => {
                shared.interrupt(reason)
            }
            _ => false,
        };
        drop(inner);
        if hit {
            Counters::bump(&self.counters.interrupts);
            metrics::counter!("turnstile_interrupts_total").increment(1);
        }
        hit
    }

    /// Messages routed to a session and not answered yet (running, queued or held).
    pub fn pending(&self, key: &SessionKey) -> usize {
        let inner = self.inner.lock();
        match inner.slots.peek(key) {
            Some(Slot::Starting { shared, .. } | Slot::Live { shared, .. }) => {
                shared.pending.load(Ordering::Acquire)
            }
            Some(Slot::Stopping { shared, next, .. }) => {
                shared.pending.load(Ordering::Acquire) + next.pending.load(Ordering::Acquire)
            }
            None => 0,
        }
    }

    /// The actor of a live session, for reads that must not activate it.
    pub fn live_actor(&self, key: &SessionKey) -> Option<ActorRef<SessionMsg>> {
        match self.inner.lock().slots.peek(key) {
            Some(Slot::Live { actor, .. }) => Some(actor.clone()),
            _ => None,
        }
    }

    /// Keys of live sessions of one user.
    pub fn live_keys_of(&self, user_id: &str) -> Vec<SessionKey> {
        self.inner
            .lock()
            .slots
            .iter()
            .filter(|(key, _)| key.user_id() == user_id)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Passivates every idle session whose deadline has passed; reschedules the others.
    /// Returns the next deadline.
    pub(crate) fn reap(&self, now: Instant) -> Option<Instant> {
        let ttl = self.deps.config.idle_ttl;
        let mut inner = self.inner.lock();
        while let Some((when, key)) = inner.deadlines.first().cloned() {
            if when > now {
                break;
            }
            inner.deadlines.pop_first();
            let Some(Slot::Live {
                shared, deadline, ..
            }) = inner.slots.peek_mut(&key)
            else {
                continue;
            };
            if *deadline != when {
                continue;
            }
            let last =
                self.deps.epoch + Duration::from_nanos(shared.last_active.load(Ordering::Acquire));
            let next = if !shared.is_idle() {
                now + ttl
            } else if last + ttl > now {
                last + ttl
            } else {
                // Restore the entry so that `mark_stopping` finds and removes it consistently.
                inner.deadlines.insert((when, key.clone()));
                Counters::bump(&self.counters.evictions_idle);
                metrics::counter!("turnstile_evictions_total", "reason" => "idle").increment(1);
                self.send_to_live(&mut inner, &key, SessionMsg::Stop(StopKind::Passivate));
                continue;
            };
            *deadline = next;
            inner.deadlines.insert((next, key));
        }
        inner.deadlines.first().map(|(when, _)| *when)
    }

    /// Whether `begin_drain` was called.
    pub fn is_draining(&self) -> bool {
        self.inner.lock().draining
    }

    /// Stops admitting turns and asks every session to passivate once its work is done.
    pub fn begin_drain(&self) {
        let mut inner = self.inner.lock();
        inner.draining = true;
        let keys: Vec<SessionKey> = inner.slots.iter().map(|(k, _)| k.clone()).collect();
        for key in keys {
            match inner.slots.peek_mut(&key) {
                Some(Slot::Starting { held, .. }) if !ends_in_stop(held) => {
                    held.push_back(SessionMsg::Stop(StopKind::Passivate));
                }
                Some(Slot::Live { .. }) => {
                    self.send_to_live(&mut inner, &key, SessionMsg::Stop(StopKind::Passivate));
                }
                _ => {}
            }
        }
    }

    /// Interrupts every running turn (they persist `shutdown_interrupted`) and refuses whatever
    /// still waits.
    pub fn force_shutdown(&self) {
        let mut inner = self.inner.lock();
        inner.forced = true;
        let keys: Vec<SessionKey> = inner.slots.iter().map(|(k, _)| k.clone()).collect();
        for key in keys {
            match inner.slots.peek_mut(&key) {
                Some(Slot::Starting { held, shared }) => {
                    // Still loading: what it holds never starts. Deletes still run; then the
                    // actor stops as soon as it is up.
                    let waiting = std::mem::take(held);
                    shared
                        .pending
                        .fetch_sub(count_turns(&waiting), Ordering::AcqRel);
                    *held = answer_all(waiting, &Error::Draining);
                    held.push_back(SessionMsg::Stop(StopKind::Shutdown));
                }
                Some(Slot::Live { shared, .. }) => {
                    shared.interrupt(InterruptReason::Shutdown);
                    self.send_to_live(&mut inner, &key, SessionMsg::Stop(StopKind::Shutdown));
                }
                Some(Slot::Stopping { shared, actor, .. }) => {
                    shared.interrupt(InterruptReason::Shutdown);
                    // Upgrades a passivation already under way; the slot is stopping already.
                    let _ = actor.send_message(SessionMsg::Stop(StopKind::Shutdown));
                }
                None => {}
            }
        }
    }

    /// Waits until no slot is left or `deadline` passes; returns whether none is left.
    pub async fn wait_empty(&self, deadline: Instant) -> bool {
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

/// Whether the last of `msgs` already stops the activation that receives them.
fn ends_in_stop(msgs: &VecDeque<SessionMsg>) -> bool {
    matches!(msgs.back(), Some(SessionMsg::Stop(_)))
}

/// How many of `msgs` are turns (what a slot's `pending` counts).
fn count_turns(msgs: &VecDeque<SessionMsg>) -> usize {
    msgs.iter()
        .filter(|m| matches!(m, SessionMsg::Turn(_)))
        .count()
}

/// Answers every waiting turn and clear with `error`; returns the deletes, in order, which
/// still need their session (a delete removes stored data even when nothing else may run).
fn answer_all(msgs: VecDeque<SessionMsg>, error: &Error) -> VecDeque<SessionMsg> {
    let mut deletes = VecDeque::new();
    for msg in msgs {
        match msg {
            SessionMsg::Turn(request) => {
                let _ = request.reply.send(Err(error.clone()));
            }
            SessionMsg::ClearContext(reply) => {
                let _ = reply.send(Err(error.clone()));
            }
            msg @ SessionMsg::Stop(StopKind::Delete(_)) => deletes.push_back(msg),
            _ => {}
        }
    }
    deletes
}

/// Awaits `work` until `deadline` (`None`: no deadline); `None` when the deadline came first.
async fn until<T>(
    deadline: Option<Instant>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, work).await.ok(),
        None => Some(work.await),
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;
    use crate::{EchoAgent, MemoryStore, Runtime};

    fn clear() -> SessionMsg {
        SessionMsg::ClearContext(oneshot::channel().0)
    }

    /// Callers that give up while in a line (their futures are dropped) leave nothing behind.
    #[tokio::test(start_paused = true)]
    async fn cancelled_callers_leave_no_line_behind() {
        let rt = Runtime::builder()
            .agent(crate::MockLlmAgent::new().with_latency(Duration::from_secs(10)))
            .store(MemoryStore::new())
            .with_capacity(1)
            .with_capacity_wait(Duration::from_secs(60))
            .build()
            .unwrap();
        let holder = {
            let rt = rt.clone();
            tokio::spawn(async move { rt.call(&SessionKey::new("u", "h").unwrap(), "x").await })
        };
        let k = SessionKey::new("u", "k").unwrap();
        let waiting: Vec<_> = (0..3)
            .map(|i| {
                let (rt, k) = (rt.clone(), k.clone());
                tokio::spawn(async move { rt.call(&k, format!("m{i}")).await })
            })
            .collect();
        let registry = rt.registry().clone();
        let mut polls = 0;
        while !registry.inner.lock().lines.contains_key(&k) {
            polls += 1;
            assert!(polls < 10_000, "the callers never queued");
            tokio::task::yield_now().await;
        }
        for call in &waiting {
            call.abort();
        }
        for call in waiting {
            assert!(call.await.unwrap_err().is_cancelled());
        }
        assert!(
            registry.inner.lock().lines.is_empty(),
            "no line is left behind"
        );
        holder.await.unwrap().unwrap();
    }

    /// The race a waiting caller must win: its slot frees, and before it wakes a newcomer for
    /// the same session routes. The newcomer must queue behind it, not take the slot.
    #[tokio::test(start_paused = true)]
    async fn a_newcomer_queues_behind_callers_waiting_for_a_slot() {
        let rt = Runtime::builder()
            .agent(EchoAgent)
            .store(MemoryStore::new())
            .with_capacity(1)
            .with_capacity_wait(Duration::from_secs(60))
            .build()
            .unwrap();
        rt.call(&SessionKey::new("u", "holder").unwrap(), "hi")
            .await
            .unwrap();
        let registry = rt.registry();
        let k = SessionKey::new("u", "k").unwrap();
        // Full: the idle holder is asked to passivate, and the caller is first in k's line.
        let first = match registry.route(&k, clear(), false) {
            Err(RouteError::AtCapacity(_, Place::First(guard))) => guard,
            _ => panic!("a full runtime makes the caller wait, first in its key's line"),
        };
        let mut polls = 0;
        while registry.live_sessions() > 0 {
            polls += 1;
            assert!(polls < 10_000, "the holder never passivated");
            tokio::task::yield_now().await;
        }
        assert!(
            matches!(
                registry.route(&k, clear(), false),
                Err(RouteError::AtCapacity(_, Place::Behind(_)))
            ),
            "a free slot must not let a newcomer overtake a waiting caller"
        );
        assert!(
            registry.route(&k, clear(), true).is_ok(),
            "the first gets it"
        );
        drop(first);
        registry.leave_line(&k);
        assert!(
            registry.inner.lock().lines.is_empty(),
            "no line is left behind"
        );
    }
}
