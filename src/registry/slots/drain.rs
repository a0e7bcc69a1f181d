//! Transitions of a drain: it begins (no new turns, every session passivates after its work),
//! and it runs out of time (running turns interrupted, waiting ones refused).

use std::sync::atomic::Ordering;

use super::{answer_all, count_turns, ends_in_stop, Effects, Mailbox, Slot, SlotMsg, Slots};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::InterruptReason;

impl<A: Mailbox> Slots<A> {
    /// Stops admitting turns and asks every session to passivate once its work is done.
    pub(crate) fn begin_drain(&mut self) {
        self.draining = true;
        let keys: Vec<SessionKey> = self.slots.iter().map(|(k, _)| k.clone()).collect();
        for key in keys {
            match self.slots.peek_mut(&key) {
                Some(Slot::Starting { held, .. }) if !ends_in_stop(held) => {
                    held.push_back(A::Msg::passivate());
                }
                Some(Slot::Live { .. }) => self.deliver(&key, A::Msg::passivate()),
                _ => {}
            }
        }
    }

    /// The drain ran out of time: interrupts every running turn (they persist
    /// `shutdown_interrupted`) and refuses whatever still waits.
    pub(crate) fn force_shutdown(&mut self, fx: &mut Effects<A::Msg>) {
        self.forced = true;
        let keys: Vec<SessionKey> = self.slots.iter().map(|(k, _)| k.clone()).collect();
        for key in keys {
            match self.slots.peek_mut(&key) {
                Some(Slot::Starting { held, shared }) => {
                    // Still loading: what it holds never starts. Deletes still run; then the
                    // actor stops as soon as it is up.
                    let waiting = std::mem::take(held);
                    shared
                        .pending
                        .fetch_sub(count_turns(&waiting), Ordering::AcqRel);
                    *held = answer_all(waiting, &Error::Draining, fx);
                    held.push_back(A::Msg::shutdown());
                }
                Some(Slot::Live { shared, .. }) => {
                    shared.interrupt(InterruptReason::Shutdown);
                    self.deliver(&key, A::Msg::shutdown());
                }
                Some(Slot::Stopping { shared, actor, .. }) => {
                    shared.interrupt(InterruptReason::Shutdown);
                    // Upgrades a passivation already under way; the slot is stopping already.
                    let _ = actor.push(A::Msg::shutdown());
                }
                None => {}
            }
        }
    }
}
