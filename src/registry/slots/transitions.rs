//! Transitions of a session's life: its actor is up, failed to start, or stopped; idle ones
//! are reaped.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{answer_all, count_turns, ends_in_stop, Class, Effects, Mailbox, Slot, SlotMsg, Slots};
use crate::error::Error;
use crate::key::SessionKey;
use crate::session::SessionShared;
use crate::stats::{Eviction, RuntimeEvent};

impl<A: Mailbox> Slots<A> {
    /// The session's actor is up: deliver what was held and mark it live.
    ///
    /// # Panics
    /// When `key` has no `Starting` slot: only the supervising task of a starting slot publishes.
    pub(crate) fn publish(
        &mut self,
        key: &SessionKey,
        actor: A,
        now: Instant,
        fx: &mut Effects<A::Msg>,
    ) {
        let Some(Slot::Starting { shared, held }) = self.slots.pop(key) else {
            unreachable!("only the supervising task of a Starting slot publishes");
        };
        let deadline = now + self.limits.idle_ttl;
        fx.wake_reaper = self
            .deadlines
            .first()
            .is_none_or(|(first, _)| deadline < *first);
        self.deadlines.insert((deadline, key.clone()));
        self.slots.push(
            key.clone(),
            Slot::Live {
                shared,
                actor,
                deadline,
            },
        );
        fx.event(RuntimeEvent::Activated);
        let mut held = held;
        while let Some(msg) = held.pop_front() {
            let stops = msg.class().stops();
            self.deliver(key, msg);
            if !matches!(self.slots.peek(key), Some(Slot::Live { .. })) {
                // Stopping: asked to (whatever came after the stop waits for the next
                // activation) or the actor died at once. Either way the rest moves on, with its
                // turn count.
                if let Some(Slot::Stopping {
                    held: rest,
                    next,
                    shared,
                    ..
                }) = self.slots.peek_mut(key)
                {
                    let moved = count_turns(&held);
                    shared.pending.fetch_sub(moved, Ordering::AcqRel);
                    next.pending.fetch_add(moved, Ordering::AcqRel);
                    rest.extend(held.drain(..));
                }
                break;
            }
            debug_assert!(!stops, "a delivered stop always leaves the slot Stopping");
        }
    }

    /// The actor could not be spawned (its session could not be loaded): everything held is
    /// answered with `error`, except deletes, which are returned (a session that cannot be
    /// loaded can still be deleted).
    pub(crate) fn activation_failed(
        &mut self,
        key: &SessionKey,
        error: &Error,
        fx: &mut Effects<A::Msg>,
    ) -> Vec<A::Msg> {
        let held = match self.release(key) {
            Some(Slot::Starting { held, .. }) => held,
            _ => VecDeque::new(),
        };
        fx.event(RuntimeEvent::ActivationFailed);
        fx.event(RuntimeEvent::Live(self.slots.len()));
        fx.slot_freed = true;
        answer_all(held, error, fx).into()
    }

    /// The actor's task ended (after its last store call). Returns the shared handle of the next
    /// activation when messages are waiting for one; the slot is then `Starting` again.
    pub(crate) fn stopped(
        &mut self,
        key: &SessionKey,
        fx: &mut Effects<A::Msg>,
    ) -> Option<Arc<SessionShared>> {
        fx.event(RuntimeEvent::Stopped);
        let next = match self.slots.peek_mut(key) {
            Some(Slot::Stopping { next, held, .. }) if !held.is_empty() => {
                let next = next.clone();
                let held = std::mem::take(held);
                self.restart(key, next, held, fx)
            }
            Some(Slot::Live { deadline, .. }) => {
                // Stopped without being asked: its mailbox is gone, and with it any waiting
                // callers' replies (they see `SessionFailed`).
                fx.event(RuntimeEvent::UnexpectedStop);
                let deadline = *deadline;
                self.deadlines.remove(&(deadline, key.clone()));
                self.release(key);
                None
            }
            _ => {
                self.release(key);
                None
            }
        };
        fx.event(RuntimeEvent::Live(self.slots.len()));
        if next.is_none() {
            fx.slot_freed = true;
        }
        next
    }

    /// Re-activates `key` for the messages held while it stopped, or releases its slot when
    /// none of them still needs a session.
    fn restart(
        &mut self,
        key: &SessionKey,
        next: Arc<SessionShared>,
        mut held: VecDeque<A::Msg>,
        fx: &mut Effects<A::Msg>,
    ) -> Option<Arc<SessionShared>> {
        // A bare passivation or shutdown left from the activation that just stopped asks
        // nothing of the next one (the drain adds its own below).
        held.retain(|m| !matches!(m.class(), Class::Passivate | Class::Shutdown));
        if self.forced {
            // Past the drain's deadline nothing that waited runs: it is answered `Draining`,
            // and only deletes still need the session.
            let turns = count_turns(&held);
            held = answer_all(held, &Error::Draining, fx);
            next.pending.fetch_sub(turns, Ordering::AcqRel);
        } else if self.draining && !held.is_empty() && !ends_in_stop(&held) {
            // Admitted before the drain: they run, then this activation stops too.
            held.push_back(A::Msg::passivate());
        }
        if held.is_empty() {
            self.release(key);
            return None;
        }
        let slot = self.slots.peek_mut(key).expect("the caller found it");
        *slot = Slot::Starting {
            shared: next.clone(),
            held,
        };
        Some(next)
    }

    /// Passivates every idle session whose deadline has passed; reschedules the others.
    /// Returns the next deadline.
    pub(crate) fn reap(&mut self, now: Instant, fx: &mut Effects<A::Msg>) -> Option<Instant> {
        let ttl = self.limits.idle_ttl;
        while let Some((when, key)) = self.deadlines.first().cloned() {
            if when > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(Slot::Live {
                shared, deadline, ..
            }) = self.slots.peek_mut(&key)
            else {
                continue;
            };
            if *deadline != when {
                continue;
            }
            let last = self.limits.epoch
                + Duration::from_nanos(shared.last_active.load(Ordering::Acquire));
            let next = if !shared.is_idle() {
                now + ttl
            } else if last + ttl > now {
                last + ttl
            } else {
                // Restore the entry so that `mark_stopping` finds and removes it consistently.
                self.deadlines.insert((when, key.clone()));
                fx.event(RuntimeEvent::Evicted(Eviction::Idle));
                self.deliver(&key, A::Msg::passivate());
                continue;
            };
            *deadline = next;
            self.deadlines.insert((next, key));
        }
        self.deadlines.first().map(|(when, _)| *when)
    }
}
