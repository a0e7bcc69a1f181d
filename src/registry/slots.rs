//! The registry's decisions, as a synchronous state machine with no tasks and no locks.
//!
//! [`Slots`] maps each key to one [`Slot`] (`Starting`, `Live` or `Stopping`) and takes the
//! registry's events — a message arrives, an activation is up or failed, an actor stopped, an
//! idle deadline passed, a drain begins or runs out of time — and answers each with a decision
//! plus [`Effects`] for the caller to carry out once it has released its lock: spawn a session,
//! answer refused messages, wake the reaper or waiting callers, record counters.
//!
//! One kind of effect happens inside the transition, not after it: pushing a message into a live
//! actor's mailbox ([`Mailbox::push`], a synchronous push into an unbounded queue that never
//! waits). Turns of one key must reach the mailbox in the order they were routed, and a `Stop`
//! must be the last thing a mailbox receives; doing the push in the same critical section as the
//! decision is what makes both hold without a per-key queue in front of every actor. Tests give
//! the machine a recording mailbox instead of an actor.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lru::LruCache;
use smallvec::SmallVec;
use tokio::time::Instant;

use crate::error::Error;
use crate::key::SessionKey;
use crate::session::SessionShared;
use crate::state::InterruptReason;
use crate::stats::{Eviction, Rejection, RuntimeEvent};

mod drain;
mod operators;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
mod transitions;

/// At most this many least-recently-used sessions are examined when looking for one to evict,
/// so that a runtime full of busy sessions does not scan them all on every activation.
pub(crate) const EVICTION_SCAN: usize = 64;

/// What the machine needs to know about a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// A turn: counted in the session's `pending`, refused while draining.
    Turn,
    /// Passivate: finish what is queued, flush, stop.
    Passivate,
    /// Shutdown: interrupt, flush, stop.
    Shutdown,
    /// Delete the session's stored data, then stop. Still runs past a drain's deadline.
    Delete,
    /// Anything else (a read, a clear).
    Other,
}

impl Class {
    fn stops(self) -> bool {
        matches!(self, Self::Passivate | Self::Shutdown | Self::Delete)
    }
}

/// A message the registry routes.
pub(crate) trait SlotMsg: Sized {
    /// How the machine treats it.
    fn class(&self) -> Class;
    /// A fresh passivation request.
    fn passivate() -> Self;
    /// A fresh shutdown request.
    fn shutdown() -> Self;
}

/// A live session's mailbox.
pub(crate) trait Mailbox: Clone {
    /// What it carries.
    type Msg: SlotMsg;
    /// Pushes without waiting. A closed mailbox (its actor died) hands the message back when
    /// it can.
    fn push(&self, msg: Self::Msg) -> Result<(), Option<Self::Msg>>;
}

/// Fixed settings of the machine.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Most slots at once.
    pub capacity: usize,
    /// Most turns of one session waiting behind the running one.
    pub max_queue: usize,
    /// How long a session may stay idle before it is passivated.
    pub idle_ttl: Duration,
    /// Zero point of [`SessionShared::last_active`] stamps.
    pub epoch: Instant,
}

/// Where one session stands.
enum Slot<A: Mailbox> {
    /// The actor is being spawned (and is loading); messages wait here, in order.
    Starting {
        shared: Arc<SessionShared>,
        held: VecDeque<A::Msg>,
    },
    Live {
        shared: Arc<SessionShared>,
        actor: A,
        /// This session's entry in `Slots::deadlines`.
        deadline: Instant,
    },
    /// The actor was asked to stop (or died). Messages wait here for the next activation, whose
    /// pending count is `next` (the stopping actor keeps its own).
    Stopping {
        shared: Arc<SessionShared>,
        actor: A,
        next: Arc<SessionShared>,
        held: VecDeque<A::Msg>,
    },
}

/// How a message was routed.
pub(crate) enum Route<M> {
    /// Delivered to the actor, or held for it.
    Accepted,
    /// Refused for good.
    Refused(Error),
    /// Others for this key wait for a free slot: the message is handed back to queue behind
    /// them.
    Behind(M),
    /// Full, and nothing could be evicted yet (an idle session may have been asked to stop):
    /// the message is handed back.
    AtCapacity(M),
}

/// What the caller does after a transition, outside its lock.
pub(crate) struct Effects<M> {
    /// Start a supervising task for this new slot.
    pub spawn: Option<(SessionKey, Arc<SessionShared>)>,
    /// Answer these messages' callers with the error (turns and clears; deletes never land
    /// here, they still run).
    pub answer: Option<(Error, Vec<M>)>,
    /// A slot was released: wake callers waiting for one.
    pub slot_freed: bool,
    /// A deadline sooner than the reaper's next one appeared.
    pub wake_reaper: bool,
    /// What happened, for counters and metrics.
    pub events: SmallVec<[RuntimeEvent; 2]>,
}

impl<M> Default for Effects<M> {
    fn default() -> Self {
        Self {
            spawn: None,
            answer: None,
            slot_freed: false,
            wake_reaper: false,
            events: SmallVec::new(),
        }
    }
}

impl<M> Effects<M> {
    fn event(&mut self, event: RuntimeEvent) {
        self.events.push(event);
    }

    fn answer(&mut self, error: &Error, msgs: impl IntoIterator<Item = M>) {
        let (_, list) = self
            .answer
            .get_or_insert_with(|| (error.clone(), Vec::new()));
        list.extend(msgs);
    }
}

/// The registry's state: every slot, the LRU order, idle deadlines, drain flags.
pub(crate) struct Slots<A: Mailbox> {
    limits: Limits,
    /// Slots in least-recently-used order (a turn promotes its session).
    slots: LruCache<SessionKey, Slot<A>>,
    /// Idle deadlines of live sessions, soonest first; exactly one per `Live` slot.
    deadlines: BTreeSet<(Instant, SessionKey)>,
    /// Every key of `slots`, in key order: the live-sessions snapshot reads a page from a cursor
    /// in O(log n + page) under the lock instead of scanning every slot (see `live.rs`).
    order: BTreeSet<SessionKey>,
    draining: bool,
    /// The drain's deadline passed: nothing waiting runs any more.
    forced: bool,
}

impl<A: Mailbox> Slots<A> {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            limits,
            slots: LruCache::unbounded(),
            deadlines: BTreeSet::new(),
            order: BTreeSet::new(),
            draining: false,
            forced: false,
        }
    }

    /// Slots held now (starting, live or stopping).
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Idle deadlines armed (one per live session).
    pub(super) fn idle_timers(&self) -> usize {
        self.deadlines.len()
    }

    pub(super) fn is_draining(&self) -> bool {
        self.draining
    }

    /// Removes a slot for good (not to be re-inserted at once, as `publish` does).
    fn release(&mut self, key: &SessionKey) -> Option<Slot<A>> {
        self.order.remove(key);
        self.slots.pop(key)
    }

    /// Routes one message. `behind`: others for this key wait for a free slot and the caller is
    /// not the first of them. `stamp`: now, as a [`SessionShared::last_active`] stamp.
    pub(super) fn route(
        &mut self,
        key: &SessionKey,
        msg: A::Msg,
        behind: bool,
        stamp: u64,
        fx: &mut Effects<A::Msg>,
    ) -> Route<A::Msg> {
        let class = msg.class();
        if (self.draining && class == Class::Turn) || self.forced {
            fx.event(RuntimeEvent::Rejected(Rejection::Draining));
            return Route::Refused(Error::Draining);
        }
        if behind {
            return Route::Behind(msg);
        }
        if self.slots.contains(key) {
            return self.route_existing(key, msg, class, stamp, fx);
        }
        if self.slots.len() >= self.limits.capacity {
            self.evict_lru(fx);
            return Route::AtCapacity(msg);
        }
        let shared = Arc::new(SessionShared::default());
        if class == Class::Turn {
            shared.pending.store(1, Ordering::Release);
            shared.last_active.store(stamp, Ordering::Release);
        }
        let mut held = VecDeque::from([msg]);
        if self.draining && !class.stops() {
            // Only a read, clear or delete activates a session during a drain: it does that one
            // thing and stops, or the drain would wait for its idle TTL.
            held.push_back(A::Msg::passivate());
        }
        self.slots.put(
            key.clone(),
            Slot::Starting {
                shared: shared.clone(),
                held,
            },
        );
        self.order.insert(key.clone());
        fx.event(RuntimeEvent::Live(self.slots.len()));
        fx.spawn = Some((key.clone(), shared));
        Route::Accepted
    }

    fn route_existing(
        &mut self,
        key: &SessionKey,
        msg: A::Msg,
        class: Class,
        stamp: u64,
        fx: &mut Effects<A::Msg>,
    ) -> Route<A::Msg> {
        let max_pending = self.limits.max_queue + 1;
        let slot = self.slots.get_mut(key).expect("checked by the caller");
        let shared = match slot {
            Slot::Starting { shared, .. } | Slot::Live { shared, .. } => shared,
            Slot::Stopping { next, .. } => next,
        };
        if class == Class::Turn {
            let pending = shared.pending.load(Ordering::Acquire);
            if pending >= max_pending {
                fx.event(RuntimeEvent::Rejected(Rejection::Overloaded));
                return Route::Refused(Error::Overloaded {
                    key: key.clone(),
                    queued: pending.saturating_sub(1),
                });
            }
            let depth = shared.pending.fetch_add(1, Ordering::AcqRel);
            fx.event(RuntimeEvent::QueueDepth(depth));
            shared.last_active.store(stamp, Ordering::Release);
        }
        match slot {
            Slot::Starting { held, .. } | Slot::Stopping { held, .. } => held.push_back(msg),
            Slot::Live { actor, .. } => {
                let pushed = actor.push(msg);
                self.after_push(key, class, pushed);
            }
        }
        Route::Accepted
    }

    /// Delivers `msg` to `key`'s actor if the session is live; never activates it.
    pub(super) fn deliver_if_live(&mut self, key: &SessionKey, msg: A::Msg) {
        self.deliver(key, msg);
    }

    /// Pushes to a live actor (see [`Slots::after_push`]); does nothing for other slots.
    fn deliver(&mut self, key: &SessionKey, msg: A::Msg) {
        let class = msg.class();
        let Some(Slot::Live { actor, .. }) = self.slots.peek(key) else {
            return;
        };
        let pushed = actor.push(msg);
        self.after_push(key, class, pushed);
    }

    /// A `Stop` pushed turns the slot into `Stopping` in the same step. If the mailbox was
    /// already closed (the actor died), the message is held for the next activation.
    fn after_push(&mut self, key: &SessionKey, class: Class, pushed: Result<(), Option<A::Msg>>) {
        match pushed {
            Ok(()) if !class.stops() => {}
            Ok(()) => self.mark_stopping(key, VecDeque::new()),
            Err(back) => self.mark_stopping(key, back.into_iter().collect()),
        }
    }

    /// Turns a `Live` slot into `Stopping`, moving turn counts of `held` messages to the next
    /// activation.
    fn mark_stopping(&mut self, key: &SessionKey, held: VecDeque<A::Msg>) {
        let Some(slot) = self.slots.peek_mut(key) else {
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
        let moved = count_turns(&held);
        shared.pending.fetch_sub(moved, Ordering::AcqRel);
        next.pending.store(moved, Ordering::Release);
        *slot = Slot::Stopping {
            shared,
            actor,
            next,
            held,
        };
        self.deadlines.remove(&(deadline, key.clone()));
    }

    /// Asks the least recently used idle session (if any among the oldest few) to passivate.
    fn evict_lru(&mut self, fx: &mut Effects<A::Msg>) {
        let victim = self
            .slots
            .iter()
            .rev()
            .take(EVICTION_SCAN)
            .find(|(_, slot)| matches!(slot, Slot::Live { shared, .. } if shared.is_idle()))
            .map(|(key, _)| key.clone());
        if let Some(key) = victim {
            fx.event(RuntimeEvent::Evicted(Eviction::Lru));
            self.deliver(&key, A::Msg::passivate());
        }
    }

    /// Interrupts a session's running turn without going through its mailbox.
    pub(super) fn interrupt(
        &self,
        key: &SessionKey,
        reason: InterruptReason,
        fx: &mut Effects<A::Msg>,
    ) -> bool {
        let hit = match self.slots.peek(key) {
            Some(Slot::Live { shared, .. } | Slot::Stopping { shared, .. }) => {
                shared.interrupt(reason)
            }
            _ => false,
        };
        if hit {
            fx.event(RuntimeEvent::Interrupted);
        }
        hit
    }

    /// Messages routed to a session and not answered yet (running, queued or held).
    pub(super) fn pending(&self, key: &SessionKey) -> usize {
        match self.slots.peek(key) {
            Some(Slot::Starting { shared, .. } | Slot::Live { shared, .. }) => {
                shared.pending.load(Ordering::Acquire)
            }
            Some(Slot::Stopping { shared, next, .. }) => {
                shared.pending.load(Ordering::Acquire) + next.pending.load(Ordering::Acquire)
            }
            None => 0,
        }
    }

    /// The actor of a live session.
    pub(super) fn live_actor(&self, key: &SessionKey) -> Option<A> {
        match self.slots.peek(key) {
            Some(Slot::Live { actor, .. }) => Some(actor.clone()),
            _ => None,
        }
    }

    /// Keys with a slot that belong to one user.
    pub(super) fn keys_of(&self, user_id: &str) -> Vec<SessionKey> {
        self.slots
            .iter()
            .filter(|(key, _)| key.user_id() == user_id)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// Whether the last of `msgs` already stops the activation that receives them.
fn ends_in_stop<M: SlotMsg>(msgs: &VecDeque<M>) -> bool {
    msgs.back().is_some_and(|m| m.class().stops())
}

/// How many of `msgs` are turns (what a slot's `pending` counts).
fn count_turns<M: SlotMsg>(msgs: &VecDeque<M>) -> usize {
    msgs.iter().filter(|m| m.class() == Class::Turn).count()
}

/// Answers every waiting turn and clear with `error` (through `fx`); returns the deletes, in
/// order, which still need their session (a delete removes stored data even when nothing else
/// may run). Passivations and shutdowns are dropped.
fn answer_all<M: SlotMsg>(msgs: VecDeque<M>, error: &Error, fx: &mut Effects<M>) -> VecDeque<M> {
    let mut deletes = VecDeque::new();
    let mut answered = Vec::new();
    for msg in msgs {
        match msg.class() {
            Class::Delete => deletes.push_back(msg),
            Class::Turn | Class::Other => answered.push(msg),
            Class::Passivate | Class::Shutdown => {}
        }
    }
    if !answered.is_empty() {
        fx.answer(error, answered);
    }
    deletes
}
