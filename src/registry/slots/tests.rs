//! The registry's transitions, one test each, and a property test over random event sequences.
//! A recording mailbox stands in for the session actor.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::*;

#[derive(Debug)]
pub(super) struct Msg {
    pub(super) id: u64,
    pub(super) class: Class,
}

impl SlotMsg for Msg {
    fn class(&self) -> Class {
        self.class
    }
    fn passivate() -> Self {
        Msg {
            id: 0,
            class: Class::Passivate,
        }
    }
    fn shutdown() -> Self {
        Msg {
            id: 0,
            class: Class::Shutdown,
        }
    }
}

/// A mailbox that records what it receives and can be closed (its actor died).
#[derive(Clone, Default)]
pub(super) struct Inbox {
    pub(super) got: Rc<RefCell<Vec<Msg>>>,
    pub(super) closed: Rc<Cell<bool>>,
}

impl Mailbox for Inbox {
    type Msg = Msg;
    fn push(&self, msg: Msg) -> Result<(), Option<Msg>> {
        if self.closed.get() {
            return Err(Some(msg));
        }
        let mut got = self.got.borrow_mut();
        assert!(
            msg.class.stops() || !got.iter().any(|m| m.class.stops()),
            "nothing but another stop reaches a mailbox after a stop"
        );
        got.push(msg);
        Ok(())
    }
}

impl Inbox {
    fn ids(&self) -> Vec<u64> {
        self.got.borrow().iter().map(|m| m.id).collect()
    }
    fn classes(&self) -> Vec<Class> {
        self.got.borrow().iter().map(|m| m.class).collect()
    }
}

pub(super) type Fx = Effects<Msg>;

pub(super) fn key(s: &str) -> SessionKey {
    SessionKey::new("u", s).unwrap()
}

pub(super) fn machine(capacity: usize, max_queue: usize) -> Slots<Inbox> {
    Slots::new(Limits {
        capacity,
        max_queue,
        idle_ttl: Duration::from_secs(60),
        epoch: Instant::now(),
    })
}

fn turn(id: u64) -> Msg {
    Msg {
        id,
        class: Class::Turn,
    }
}

fn other(id: u64) -> Msg {
    Msg {
        id,
        class: Class::Other,
    }
}

fn delete(id: u64) -> Msg {
    Msg {
        id,
        class: Class::Delete,
    }
}

/// Routes with no line ahead; returns the effects.
fn route(m: &mut Slots<Inbox>, k: &SessionKey, msg: Msg) -> (Route<Msg>, Fx) {
    let mut fx = Fx::default();
    let r = m.route(k, msg, false, 0, &mut fx);
    (r, fx)
}

fn accepted(r: &Route<Msg>) -> bool {
    matches!(r, Route::Accepted)
}

pub(super) fn held_ids(m: &Slots<Inbox>, k: &SessionKey) -> Vec<u64> {
    match m.slots.peek(k) {
        Some(Slot::Starting { held, .. } | Slot::Stopping { held, .. }) => {
            held.iter().map(|m| m.id).collect()
        }
        _ => Vec::new(),
    }
}

/// Brings `k` live with a fresh inbox.
fn publish(m: &mut Slots<Inbox>, k: &SessionKey) -> (Inbox, Fx) {
    let inbox = Inbox::default();
    let mut fx = Fx::default();
    m.publish(k, inbox.clone(), Instant::now(), &mut fx);
    (inbox, fx)
}

fn answered_ids(fx: &Fx) -> Vec<u64> {
    fx.answer
        .as_ref()
        .map(|(_, msgs)| msgs.iter().map(|m| m.id).collect())
        .unwrap_or_default()
}

#[test]
fn a_first_message_spawns_once_and_later_ones_are_held_in_order() {
    let mut m = machine(4, 8);
    let k = key("a");
    let (r, fx) = route(&mut m, &k, turn(1));
    assert!(accepted(&r));
    let (spawned, shared) = fx.spawn.expect("the first message activates the session");
    assert_eq!(spawned, k);
    assert_eq!(shared.pending.load(Ordering::Acquire), 1);
    let (r, fx) = route(&mut m, &k, turn(2));
    assert!(accepted(&r) && fx.spawn.is_none(), "one activation per key");
    assert_eq!(held_ids(&m, &k), [1, 2]);
    assert_eq!(m.pending(&k), 2);
}

#[test]
fn publish_delivers_what_was_held_in_order_and_later_turns_go_straight_in() {
    let mut m = machine(4, 8);
    let k = key("a");
    route(&mut m, &k, turn(1));
    route(&mut m, &k, other(2));
    let (inbox, fx) = publish(&mut m, &k);
    assert!(fx.events.contains(&RuntimeEvent::Activated));
    assert!(fx.wake_reaper, "the first idle deadline wakes the reaper");
    assert_eq!(inbox.ids(), [1, 2]);
    route(&mut m, &k, turn(3));
    assert_eq!(inbox.ids(), [1, 2, 3]);
    assert_eq!(m.idle_timers(), 1);
    assert!(m.live_actor(&k).is_some());
}

#[test]
fn a_turn_past_the_queue_bound_is_refused_overloaded_and_never_delivered() {
    let mut m = machine(4, 1);
    let k = key("a");
    route(&mut m, &k, turn(1));
    let (inbox, _) = publish(&mut m, &k);
    route(&mut m, &k, turn(2));
    let (r, fx) = route(&mut m, &k, turn(3));
    assert!(matches!(
        r,
        Route::Refused(Error::Overloaded { queued: 1, .. })
    ));
    assert!(fx
        .events
        .contains(&RuntimeEvent::Rejected(Rejection::Overloaded)));
    assert_eq!(inbox.ids(), [1, 2]);
    // Reads are not turns: they are never refused for the queue bound.
    assert!(accepted(&route(&mut m, &k, other(4)).0));
}

#[test]
fn messages_held_across_a_stop_go_to_the_next_activation_after_the_final_flush() {
    let mut m = machine(4, 8);
    let k = key("a");
    route(&mut m, &k, turn(1));
    let (old, _) = publish(&mut m, &k);
    let mut fx = Fx::default();
    m.reap(Instant::now() + Duration::from_secs(3600), &mut fx);
    // Turn 1 is still pending: not idle, so not reaped.
    assert_eq!(old.classes(), [Class::Turn]);
    let shared = match m.slots.peek(&k) {
        Some(Slot::Live { shared, .. }) => shared.clone(),
        _ => panic!("live"),
    };
    shared.pending.store(0, Ordering::Release);
    m.reap(Instant::now() + Duration::from_secs(7200), &mut fx);
    assert_eq!(old.classes(), [Class::Turn, Class::Passivate]);
    assert!(fx.events.contains(&RuntimeEvent::Evicted(Eviction::Idle)));
    // While the old actor flushes, new messages wait; nothing reaches the old mailbox.
    route(&mut m, &k, turn(2));
    route(&mut m, &k, turn(3));
    assert_eq!(old.ids().len(), 2);
    assert_eq!(held_ids(&m, &k), [2, 3]);
    assert_eq!(m.pending(&k), 2);
    let mut fx = Fx::default();
    let next = m
        .stopped(&k, &mut fx)
        .expect("held messages re-activate the session");
    assert_eq!(next.pending.load(Ordering::Acquire), 2);
    assert!(!fx.slot_freed, "the slot is kept for the next activation");
    let (new, _) = publish(&mut m, &k);
    assert_eq!(new.ids(), [2, 3]);
}

#[test]
fn a_stopped_session_with_nothing_held_frees_its_slot() {
    let mut m = machine(4, 8);
    let k = key("a");
    route(&mut m, &k, other(1));
    publish(&mut m, &k);
    m.begin_drain();
    let mut fx = Fx::default();
    assert!(m.stopped(&k, &mut fx).is_none());
    assert!(fx.slot_freed);
    assert!(m.is_empty());
    assert_eq!(m.idle_timers(), 0, "no idle timer is left behind");
}

#[test]
fn a_bare_shutdown_held_across_a_stop_does_not_reactivate() {
    let mut m = machine(4, 8);
    let k = key("a");
    route(&mut m, &k, delete(1));
    m.begin_drain();
    m.force_shutdown(&mut Fx::default());
    // The delete stops the first activation; the shutdown queued behind it is left over.
    let (inbox, _) = publish(&mut m, &k);
    assert_eq!(inbox.classes(), [Class::Delete]);
    assert_eq!(held_ids(&m, &k), [0]);
    let mut fx = Fx::default();
    assert!(
        m.stopped(&k, &mut fx).is_none(),
        "a bare stop asks nothing of a next activation"
    );
    assert!(fx.slot_freed && m.is_empty());
}

#[test]
fn a_message_for_a_dead_actor_is_held_for_the_next_activation() {
    let mut m = machine(4, 8);
    let k = key("a");
    route(&mut m, &k, other(1));
    let (inbox, _) = publish(&mut m, &k);
    inbox.closed.set(true);
    let (r, _) = route(&mut m, &k, turn(2));
    assert!(accepted(&r));
    assert_eq!(held_ids(&m, &k), [2]);
    assert_eq!(m.pending(&k), 1, "the turn counts for the next activation");
    let next = m.stopped(&k, &mut Fx::default()).expect("re-activates");
    let (new, _) = publish(&mut m, &k);
    assert_eq!(new.ids(), [2]);
    assert_eq!(next.pending.load(Ordering::Acquire), 1);
}

#[test]
fn at_capacity_the_least_recently_used_idle_session_is_asked_to_passivate() {
    let mut m = machine(2, 8);
    let (a, b, c) = (key("a"), key("b"), key("c"));
    route(&mut m, &a, other(1));
    let (ia, _) = publish(&mut m, &a);
    route(&mut m, &b, other(2));
    let (ib, _) = publish(&mut m, &b);
    // `a` is used again: `b` is now the least recently used.
    route(&mut m, &a, other(3));
    let (r, fx) = route(&mut m, &c, turn(4));
    assert!(matches!(r, Route::AtCapacity(Msg { id: 4, .. })));
    assert!(fx.spawn.is_none());
    assert!(fx.events.contains(&RuntimeEvent::Evicted(Eviction::Lru)));
    assert_eq!(ib.classes(), [Class::Other, Class::Passivate]);
    assert_eq!(ia.classes(), [Class::Other, Class::Other]);
    assert_eq!(m.len(), 2, "the capacity is never exceeded");
}

#[test]
fn at_capacity_a_busy_session_is_never_evicted() {
    let mut m = machine(1, 8);
    let (a, b) = (key("a"), key("b"));
    route(&mut m, &a, turn(1));
    let (ia, _) = publish(&mut m, &a);
    let (r, fx) = route(&mut m, &b, turn(2));
    assert!(matches!(r, Route::AtCapacity(_)));
    assert!(fx.events.is_empty());
    assert_eq!(ia.classes(), [Class::Turn]);
}

#[test]
fn a_newcomer_behind_waiting_callers_is_handed_back() {
    let mut m = machine(1, 8);
    let k = key("a");
    let mut fx = Fx::default();
    let r = m.route(&k, turn(1), true, 0, &mut fx);
    assert!(matches!(r, Route::Behind(Msg { id: 1, .. })));
    assert!(m.is_empty() && fx.spawn.is_none());
}

#[test]
fn a_drain_refuses_turns_but_a_read_activates_once_and_stops() {
    let mut m = machine(4, 8);
    let k = key("a");
    m.begin_drain();
    let (r, fx) = route(&mut m, &k, turn(1));
    assert!(matches!(r, Route::Refused(Error::Draining)));
    assert!(fx
        .events
        .contains(&RuntimeEvent::Rejected(Rejection::Draining)));
    assert!(accepted(&route(&mut m, &k, other(2)).0));
    let (inbox, _) = publish(&mut m, &k);
    assert_eq!(inbox.classes(), [Class::Other, Class::Passivate]);
}

#[test]
fn beginning_a_drain_asks_live_and_starting_sessions_to_passivate_after_their_work() {
    let mut m = machine(4, 8);
    let (a, b) = (key("a"), key("b"));
    route(&mut m, &a, turn(1));
    let (ia, _) = publish(&mut m, &a);
    route(&mut m, &b, turn(2));
    m.begin_drain();
    assert_eq!(ia.classes(), [Class::Turn, Class::Passivate]);
    let (ib, _) = publish(&mut m, &b);
    assert_eq!(ib.classes(), [Class::Turn, Class::Passivate]);
}

#[test]
fn past_the_drain_deadline_waiting_turns_are_answered_draining_and_deletes_still_run() {
    let mut m = machine(4, 8);
    let (a, b) = (key("a"), key("b"));
    // `a` is starting with a turn and a delete held; `b` is live and stopping with a turn held.
    route(&mut m, &a, turn(1));
    route(&mut m, &a, delete(2));
    route(&mut m, &b, other(3));
    let (ib, _) = publish(&mut m, &b);
    m.begin_drain();
    m.force_shutdown(&mut Fx::default());
    assert_eq!(ib.classes().last(), Some(&Class::Shutdown));
    let mut fx = Fx::default();
    let (r, _) = route(&mut m, &a, turn(4));
    assert!(matches!(r, Route::Refused(Error::Draining)));
    assert_eq!(held_ids(&m, &a), [2, 0], "the delete, then the shutdown");
    assert_eq!(m.pending(&a), 0);
    let (ia, _) = publish(&mut m, &a);
    assert_eq!(ia.classes(), [Class::Delete]);
    assert!(m.stopped(&b, &mut fx).is_none());
}

#[test]
fn force_shutdown_answers_turns_held_by_a_starting_session() {
    let mut m = machine(4, 8);
    let a = key("a");
    route(&mut m, &a, turn(1));
    route(&mut m, &a, other(2));
    let mut fx = Fx::default();
    m.force_shutdown(&mut fx);
    assert_eq!(answered_ids(&fx), [1, 2]);
    assert!(matches!(fx.answer, Some((Error::Draining, _))));
}

#[test]
fn after_a_forced_drain_turns_held_for_a_stopping_session_are_answered_not_run() {
    let mut m = machine(4, 8);
    let a = key("a");
    route(&mut m, &a, other(1));
    let (inbox, _) = publish(&mut m, &a);
    inbox.closed.set(true);
    route(&mut m, &a, turn(2));
    route(&mut m, &a, delete(3));
    m.begin_drain();
    m.force_shutdown(&mut Fx::default());
    let mut fx = Fx::default();
    m.stopped(&a, &mut fx)
        .expect("the delete still needs the session");
    assert_eq!(answered_ids(&fx), [2]);
    assert_eq!(held_ids(&m, &a), [3]);
    assert_eq!(m.pending(&a), 0);
}

#[test]
fn a_failed_activation_answers_what_was_held_and_returns_the_deletes() {
    let mut m = machine(4, 8);
    let a = key("a");
    route(&mut m, &a, turn(1));
    route(&mut m, &a, delete(2));
    route(&mut m, &a, other(3));
    let mut fx = Fx::default();
    let deletes = m.activation_failed(&a, &Error::Draining, &mut fx);
    assert_eq!(deletes.iter().map(|m| m.id).collect::<Vec<_>>(), [2]);
    assert_eq!(answered_ids(&fx), [1, 3]);
    assert!(fx.slot_freed && m.is_empty());
    assert!(fx.events.contains(&RuntimeEvent::ActivationFailed));
}

#[test]
fn the_reaper_passivates_only_sessions_idle_past_their_ttl() {
    let mut m = machine(4, 8);
    let (a, b) = (key("a"), key("b"));
    let t0 = Instant::now();
    for (k, id) in [(&a, 1), (&b, 2)] {
        route(&mut m, k, other(id));
    }
    let (ia, _) = publish(&mut m, &a);
    let (ib, _) = publish(&mut m, &b);
    // `b` has a turn in flight.
    route(&mut m, &b, turn(3));
    let mut fx = Fx::default();
    let next = m.reap(t0 + Duration::from_secs(61), &mut fx);
    assert_eq!(ia.classes(), [Class::Other, Class::Passivate]);
    assert_eq!(ib.classes(), [Class::Other, Class::Turn]);
    assert_eq!(
        fx.events.as_slice(),
        [RuntimeEvent::Evicted(Eviction::Idle)]
    );
    assert_eq!(m.idle_timers(), 1, "only the busy session keeps a timer");
    assert!(next.is_some_and(|next| next > t0 + Duration::from_secs(61)));
}

#[test]
fn an_actor_that_stops_unasked_leaves_no_slot_or_timer() {
    let mut m = machine(4, 8);
    let a = key("a");
    route(&mut m, &a, other(1));
    publish(&mut m, &a);
    let mut fx = Fx::default();
    assert!(m.stopped(&a, &mut fx).is_none());
    assert!(fx.events.contains(&RuntimeEvent::UnexpectedStop));
    assert!(m.is_empty());
    assert_eq!(m.idle_timers(), 0);
}

#[test]
fn an_interrupt_reaches_only_a_live_session_and_is_counted() {
    let mut m = machine(4, 8);
    let a = key("a");
    let mut fx = Fx::default();
    assert!(!m.interrupt(&a, InterruptReason::Requested, &mut fx));
    route(&mut m, &a, turn(1));
    publish(&mut m, &a);
    let Some(Slot::Live { shared, .. }) = m.slots.peek(&a) else {
        panic!("live");
    };
    *shared.current.lock() = Some(Arc::default());
    assert!(m.interrupt(&a, InterruptReason::Requested, &mut fx));
    assert_eq!(fx.events.as_slice(), [RuntimeEvent::Interrupted]);
}
