//! The overlap-policy queue: what becomes of a message that arrives for a session, and which
//! messages the next turn takes.
//!
//! It is pure and synchronous, and generic over the message so that its rules are tested without
//! an actor: the actor hands every arriving message to [`TurnQueue::admit`], carries out the
//! [`Admission`] it gets back (start a turn, interrupt the running one, answer `Busy`), and asks
//! [`TurnQueue::next_batch`] what to run whenever a turn ends. A new busy policy touches this file
//! (and the actor only if it needs a new kind of decision).

use std::collections::VecDeque;

use crate::call::OverlapPolicy;
use crate::state::InterruptReason;

/// The messages of one session that wait for its running turn, and whether a turn runs.
///
/// Invariant: `running` is true from the moment a message is handed out to run (by
/// [`Admission::Start`] or [`TurnQueue::next_batch`]) until [`TurnQueue::turn_ended`].
#[derive(Debug)]
pub(crate) struct TurnQueue<T> {
    /// Messages waiting for the running turn to end, in the order they will run.
    waiting: VecDeque<Waiting<T>>,
    /// Messages superseded (`Latest`) while the current turn runs. They never run, but they are
    /// recorded after that turn and answered when it ends: nothing the user said is lost.
    superseded: Vec<T>,
    /// A turn is running.
    running: bool,
}

/// A waiting message with what the queue needs to know about it.
#[derive(Debug)]
struct Waiting<T> {
    message: T,
    policy: OverlapPolicy,
    /// It came from `interrupt_with`: it runs before anything queued normally.
    front: bool,
}

/// What the session must do with a message it was just given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission<T> {
    /// Nothing runs or waits: run this message now, alone.
    Start(T),
    /// The message waits. When `interrupt` is set, the running turn must be interrupted with
    /// that reason (the message wants to go next).
    Wait {
        /// Why to interrupt the running turn, if it must be.
        interrupt: Option<InterruptReason>,
    },
    /// Refused (`Reject` while busy): answer `Busy` without running it.
    Reject(T),
}

impl<T> Default for TurnQueue<T> {
    fn default() -> Self {
        Self {
            waiting: VecDeque::new(),
            superseded: Vec::new(),
            running: false,
        }
    }
}

impl<T> TurnQueue<T> {
    /// Whether a turn runs or messages wait: an arriving message then meets its policy.
    pub(super) fn is_busy(&self) -> bool {
        self.running || !self.waiting.is_empty()
    }

    /// Whether messages wait for a turn (none may run yet).
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Decides what becomes of an arriving message. `policy` is the arriving message's own
    /// policy; `front` marks `interrupt_with`, which overrides it.
    pub(super) fn admit(&mut self, message: T, policy: OverlapPolicy, front: bool) -> Admission<T> {
        if !self.is_busy() {
            self.running = true;
            return Admission::Start(message);
        }
        let waiting = Waiting {
            message,
            policy,
            front,
        };
        if front {
            // `interrupt_with` interrupted what ran when it was called; a turn that started since
            // (it was already in the mailbox) is what the user now wants cut short. It goes ahead
            // of the queue, behind earlier `interrupt_with` messages: they keep their order.
            let at = self.waiting.iter().take_while(|w| w.front).count();
            self.waiting.insert(at, waiting);
            return self.wait_interrupting(InterruptReason::Requested);
        }
        match policy {
            OverlapPolicy::Queue | OverlapPolicy::Merge => {
                self.waiting.push_back(waiting);
                Admission::Wait { interrupt: None }
            }
            OverlapPolicy::Reject => Admission::Reject(waiting.message),
            OverlapPolicy::Latest => {
                let older = self.waiting.drain(..).map(|w| w.message);
                self.superseded.extend(older);
                self.waiting.push_back(waiting);
                self.wait_interrupting(InterruptReason::Superseded)
            }
        }
    }

    fn wait_interrupting(&self, reason: InterruptReason) -> Admission<T> {
        Admission::Wait {
            interrupt: self.running.then_some(reason),
        }
    }

    /// The next turn's messages, when no turn runs: the head of the queue, plus every `Merge`
    /// message right behind a `Merge` head (an `interrupt_with` message is never merged into
    /// it). The queue then counts the turn as running.
    pub(super) fn next_batch(&mut self) -> Option<Vec<T>> {
        if self.running {
            return None;
        }
        let head = self.waiting.pop_front()?;
        let merging = head.policy == OverlapPolicy::Merge;
        let mut batch = vec![head.message];
        while merging
            && self
                .waiting
                .front()
                .is_some_and(|w| w.policy == OverlapPolicy::Merge && !w.front)
        {
            batch.extend(self.waiting.pop_front().map(|w| w.message));
        }
        self.running = true;
        Some(batch)
    }

    /// The running turn ended. Returns the messages it superseded, to be recorded after it and
    /// answered `Superseded`.
    pub(super) fn turn_ended(&mut self) -> Vec<T> {
        self.running = false;
        std::mem::take(&mut self.superseded)
    }

    /// Takes every waiting message out, to be refused (the session stops, or its store fails).
    /// Superseded messages stay: they are answered with the running turn.
    pub(super) fn take_waiting(&mut self) -> Vec<T> {
        self.waiting.drain(..).map(|w| w.message).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OverlapPolicy::{Latest, Merge, Queue, Reject};

    const NO_INTERRUPT: Admission<&str> = Admission::Wait { interrupt: None };

    /// A queue whose turn for `"running"` has started.
    fn busy() -> TurnQueue<&'static str> {
        let mut queue = TurnQueue::default();
        assert_eq!(
            queue.admit("running", Queue, false),
            Admission::Start("running")
        );
        queue
    }

    /// Ends the running turn and takes the next batch.
    fn next(queue: &mut TurnQueue<&'static str>) -> Option<Vec<&'static str>> {
        queue.turn_ended();
        queue.next_batch()
    }

    #[test]
    fn an_idle_session_runs_a_message_at_once_whatever_its_policy() {
        for policy in [Queue, Latest, Reject, Merge] {
            for front in [false, true] {
                let mut queue = TurnQueue::default();
                assert!(!queue.is_busy());
                assert_eq!(queue.admit("a", policy, front), Admission::Start("a"));
                assert!(
                    queue.is_busy(),
                    "{policy:?}: the started turn makes it busy"
                );
            }
        }
    }

    #[test]
    fn queue_waits_and_runs_in_arrival_order() {
        let mut queue = busy();
        assert_eq!(queue.admit("b", Queue, false), NO_INTERRUPT);
        assert_eq!(queue.admit("c", Queue, false), NO_INTERRUPT);
        assert_eq!(next(&mut queue), Some(vec!["b"]));
        assert_eq!(next(&mut queue), Some(vec!["c"]));
        assert_eq!(next(&mut queue), None);
        assert!(!queue.is_busy());
    }

    #[test]
    fn nothing_new_starts_while_a_turn_runs() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        assert_eq!(queue.next_batch(), None);
        assert_eq!(next(&mut queue), Some(vec!["b"]));
    }

    #[test]
    fn latest_interrupts_the_running_turn_and_supersedes_what_waits() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        queue.admit("c", Queue, false);
        assert_eq!(
            queue.admit("d", Latest, false),
            Admission::Wait {
                interrupt: Some(InterruptReason::Superseded)
            }
        );
        // The superseded messages come back with the running turn's end, for the history.
        assert_eq!(queue.turn_ended(), vec!["b", "c"]);
        assert_eq!(queue.next_batch(), Some(vec!["d"]));
        assert_eq!(queue.turn_ended(), Vec::<&str>::new());
    }

    #[test]
    fn latest_with_nothing_waiting_supersedes_nothing() {
        let mut queue = busy();
        assert_eq!(
            queue.admit("b", Latest, false),
            Admission::Wait {
                interrupt: Some(InterruptReason::Superseded)
            }
        );
        assert!(queue.turn_ended().is_empty());
        assert_eq!(queue.next_batch(), Some(vec!["b"]));
    }

    #[test]
    fn a_newer_latest_supersedes_an_older_latest() {
        let mut queue = busy();
        queue.admit("b", Latest, false);
        queue.admit("c", Latest, false);
        assert_eq!(queue.turn_ended(), vec!["b"]);
        assert_eq!(queue.next_batch(), Some(vec!["c"]));
    }

    #[test]
    fn reject_is_refused_while_a_turn_runs() {
        let mut queue = busy();
        assert_eq!(queue.admit("b", Reject, false), Admission::Reject("b"));
        assert_eq!(next(&mut queue), None);
    }

    #[test]
    fn reject_is_refused_while_messages_wait_and_leaves_them_alone() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        assert_eq!(queue.admit("c", Reject, false), Admission::Reject("c"));
        assert_eq!(next(&mut queue), Some(vec!["b"]));
    }

    #[test]
    fn merge_hands_every_waiting_merge_message_to_one_turn() {
        let mut queue = busy();
        for input in ["b", "c", "d"] {
            assert_eq!(queue.admit(input, Merge, false), NO_INTERRUPT);
        }
        assert_eq!(next(&mut queue), Some(vec!["b", "c", "d"]));
        assert_eq!(next(&mut queue), None);
    }

    #[test]
    fn a_merge_batch_stops_at_a_queued_message() {
        let mut queue = busy();
        queue.admit("b", Merge, false);
        queue.admit("c", Queue, false);
        queue.admit("d", Merge, false);
        assert_eq!(next(&mut queue), Some(vec!["b"]));
        assert_eq!(next(&mut queue), Some(vec!["c"]));
        assert_eq!(next(&mut queue), Some(vec!["d"]));
    }

    #[test]
    fn a_queue_head_runs_alone_even_with_merge_messages_behind_it() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        queue.admit("c", Merge, false);
        queue.admit("d", Merge, false);
        assert_eq!(next(&mut queue), Some(vec!["b"]));
        assert_eq!(next(&mut queue), Some(vec!["c", "d"]));
    }

    #[test]
    fn latest_during_merge_supersedes_the_messages_waiting_to_merge() {
        let mut queue = busy();
        queue.admit("b", Merge, false);
        queue.admit("c", Merge, false);
        queue.admit("d", Latest, false);
        assert_eq!(queue.turn_ended(), vec!["b", "c"]);
        assert_eq!(queue.next_batch(), Some(vec!["d"]));
    }

    #[test]
    fn merge_behind_latest_waits_but_does_not_merge_with_it() {
        let mut queue = busy();
        queue.admit("b", Latest, false);
        queue.admit("c", Merge, false);
        assert!(queue.turn_ended().is_empty());
        assert_eq!(queue.next_batch(), Some(vec!["b"]));
        assert_eq!(next(&mut queue), Some(vec!["c"]));
    }

    #[test]
    fn interrupt_with_goes_ahead_of_the_queue_and_interrupts_the_running_turn() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        queue.admit("c", Merge, false);
        assert_eq!(
            queue.admit("now", Queue, true),
            Admission::Wait {
                interrupt: Some(InterruptReason::Requested)
            }
        );
        assert_eq!(next(&mut queue), Some(vec!["now"]));
        assert_eq!(next(&mut queue), Some(vec!["b"]));
        assert_eq!(next(&mut queue), Some(vec!["c"]));
    }

    #[test]
    fn interrupt_with_messages_keep_their_order_among_themselves() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        queue.admit("first", Queue, true);
        queue.admit("second", Queue, true);
        assert_eq!(next(&mut queue), Some(vec!["first"]));
        assert_eq!(next(&mut queue), Some(vec!["second"]));
        assert_eq!(next(&mut queue), Some(vec!["b"]));
    }

    #[test]
    fn interrupt_with_is_never_merged_into_a_merge_batch() {
        let mut queue = busy();
        queue.admit("first", Merge, true);
        queue.admit("second", Merge, true);
        queue.admit("b", Merge, false);
        // A front `Merge` head takes the ordinary `Merge` messages behind it, but never another
        // `interrupt_with` message.
        assert_eq!(next(&mut queue), Some(vec!["first"]));
        assert_eq!(next(&mut queue), Some(vec!["second", "b"]));
    }

    #[test]
    fn interrupt_with_overrides_reject_and_latest() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        assert_eq!(
            queue.admit("now", Reject, true),
            Admission::Wait {
                interrupt: Some(InterruptReason::Requested)
            }
        );
        queue.admit("also", Latest, true);
        // Neither was refused nor superseded anything.
        assert!(queue.turn_ended().is_empty());
        assert_eq!(queue.next_batch(), Some(vec!["now"]));
        assert_eq!(next(&mut queue), Some(vec!["also"]));
        assert_eq!(next(&mut queue), Some(vec!["b"]));
    }

    #[test]
    fn latest_supersedes_waiting_interrupt_with_messages_too() {
        let mut queue = busy();
        queue.admit("now", Queue, true);
        queue.admit("b", Queue, false);
        queue.admit("last", Latest, false);
        assert_eq!(queue.turn_ended(), vec!["now", "b"]);
        assert_eq!(queue.next_batch(), Some(vec!["last"]));
    }

    #[test]
    fn taking_the_waiting_messages_keeps_the_superseded_ones_for_the_history() {
        let mut queue = busy();
        queue.admit("b", Queue, false);
        queue.admit("c", Latest, false);
        queue.admit("d", Queue, false);
        assert_eq!(queue.take_waiting(), vec!["c", "d"]);
        assert!(queue.is_busy(), "the running turn still runs");
        assert_eq!(queue.turn_ended(), vec!["b"]);
        assert_eq!(queue.next_batch(), None);
        assert!(!queue.is_busy());
    }
}
