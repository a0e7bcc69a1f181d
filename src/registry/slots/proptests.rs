//! Random event sequences against the registry's invariants, with the recording mailbox of the
//! unit tests standing in for actors.

use std::collections::HashMap;

use proptest::prelude::*;

use super::tests::{held_ids, key, machine, Fx, Inbox, Msg};
use super::*;

#[derive(Debug, Clone)]
enum Op {
    Route(usize, Class),
    Publish(usize),
    FailActivation(usize),
    /// The live actor works through its mailbox (answering turns).
    Process(usize),
    /// The actor's task ends, if it was asked to stop or died.
    End(usize),
    /// The actor dies (its mailbox closes; what it held is lost to `SessionFailed`).
    Kill(usize),
    Reap(u64),
    Drain,
    Force,
}

const KEYS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS;
    prop_oneof![
        4 => (k.clone(), prop_oneof![
            6 => Just(Class::Turn),
            2 => Just(Class::Other),
            1 => Just(Class::Delete),
        ]).prop_map(|(k, c)| Op::Route(k, c)),
        3 => k.clone().prop_map(Op::Publish),
        1 => k.clone().prop_map(Op::FailActivation),
        3 => k.clone().prop_map(Op::Process),
        2 => k.clone().prop_map(Op::End),
        1 => k.clone().prop_map(Op::Kill),
        1 => (0u64..120).prop_map(Op::Reap),
        1 => Just(Op::Drain),
        1 => Just(Op::Force),
    ]
}

/// One key's actors as the harness sees them.
#[derive(Default)]
struct Actors {
    /// A supervising task is about to spawn an actor with this pending count.
    spawning: Option<Arc<SessionShared>>,
    /// The actor spawned and not ended, with how many of its messages it processed.
    alive: Option<(Inbox, Arc<SessionShared>, usize)>,
}

/// Where every message went.
#[derive(Default)]
struct Ledger {
    routed: u64,
    refused: Vec<u64>,
    answered: Vec<u64>,
    processed: Vec<u64>,
    /// Lost with an actor that died: its callers see `SessionFailed`.
    died: Vec<u64>,
}

struct Harness {
    m: Slots<Inbox>,
    keys: Vec<SessionKey>,
    actors: Vec<Actors>,
    ledger: Ledger,
    now: Instant,
    capacity: usize,
}

impl Harness {
    fn new() -> Self {
        let capacity = 2;
        Self {
            m: machine(capacity, 2),
            keys: (0..KEYS).map(|i| key(&format!("k{i}"))).collect(),
            actors: (0..KEYS).map(|_| Actors::default()).collect(),
            ledger: Ledger::default(),
            now: Instant::now(),
            capacity,
        }
    }

    fn effects(&mut self, fx: Fx) {
        if let Some((k, shared)) = fx.spawn {
            let i = self.keys.iter().position(|x| *x == k).unwrap();
            let actors = &mut self.actors[i];
            assert!(
                actors.spawning.is_none() && actors.alive.is_none(),
                "a second actor for one key"
            );
            actors.spawning = Some(shared);
        }
        if let Some((_, msgs)) = fx.answer {
            self.ledger.answered.extend(msgs.iter().map(|m| m.id));
        }
    }

    fn apply(&mut self, op: Op) {
        let mut fx = Fx::default();
        match op {
            Op::Route(i, class) => {
                self.ledger.routed += 1;
                let id = self.ledger.routed;
                let k = self.keys[i].clone();
                match self.m.route(&k, Msg { id, class }, false, 0, &mut fx) {
                    Route::Accepted => {}
                    Route::Refused(_) => self.ledger.refused.push(id),
                    Route::Behind(msg) | Route::AtCapacity(msg) => self.ledger.refused.push(msg.id),
                }
            }
            Op::Publish(i) => {
                if let Some(shared) = self.actors[i].spawning.take() {
                    let inbox = Inbox::default();
                    self.m
                        .publish(&self.keys[i], inbox.clone(), self.now, &mut fx);
                    self.actors[i].alive = Some((inbox, shared, 0));
                }
            }
            Op::FailActivation(i) => {
                if self.actors[i].spawning.take().is_some() {
                    let deletes =
                        self.m
                            .activation_failed(&self.keys[i], &Error::Draining, &mut fx);
                    self.ledger.processed.extend(deletes.iter().map(|m| m.id));
                }
            }
            Op::Process(i) => {
                if let Some((inbox, shared, done)) = &mut self.actors[i].alive {
                    if !inbox.closed.get() {
                        for msg in &inbox.got.borrow()[*done..] {
                            if msg.class == Class::Turn {
                                shared.pending.fetch_sub(1, Ordering::AcqRel);
                            }
                            if msg.id != 0 {
                                self.ledger.processed.push(msg.id);
                            }
                        }
                        *done = inbox.got.borrow().len();
                    }
                }
            }
            Op::Kill(i) => {
                if let Some((inbox, _, done)) = &mut self.actors[i].alive {
                    if !inbox.closed.get() {
                        inbox.closed.set(true);
                        let got = inbox.got.borrow();
                        self.ledger
                            .died
                            .extend(got[*done..].iter().map(|m| m.id).filter(|id| *id != 0));
                        *done = got.len();
                    }
                }
            }
            Op::End(i) => {
                let ends = self.actors[i]
                    .alive
                    .as_ref()
                    .is_some_and(|(inbox, _, done)| {
                        let got = inbox.got.borrow();
                        inbox.closed.get()
                            || (*done == got.len() && got.iter().any(|m| m.class.stops()))
                    });
                if ends {
                    self.actors[i].alive = None;
                    self.actors[i].spawning = self.m.stopped(&self.keys[i], &mut fx);
                }
            }
            Op::Reap(secs) => {
                self.now += Duration::from_secs(secs);
                self.m.reap(self.now, &mut fx);
            }
            Op::Drain => self.m.begin_drain(),
            Op::Force => self.m.force_shutdown(&mut fx),
        }
        self.effects(fx);
        self.check();
    }

    fn check(&self) {
        assert!(self.m.len() <= self.capacity, "capacity exceeded");
        assert_eq!(
            self.m.order.len(),
            self.m.len(),
            "the key index holds every slot"
        );
        assert!(self.m.order.iter().all(|k| self.m.slots.contains(k)));
        for (i, k) in self.keys.iter().enumerate() {
            let actors = &self.actors[i];
            assert!(
                !(actors.spawning.is_some() && actors.alive.is_some()),
                "two actors for one key"
            );
            match self.m.slots.peek(k) {
                None => assert!(actors.spawning.is_none() && actors.alive.is_none()),
                Some(Slot::Starting { shared, held }) => {
                    assert!(actors.alive.is_none(), "starting while an actor runs");
                    let spawning = actors.spawning.as_ref().expect("a starting slot spawns");
                    assert!(Arc::ptr_eq(spawning, shared));
                    assert_eq!(shared.pending.load(Ordering::Acquire), count_turns(held));
                }
                Some(Slot::Live { shared, .. }) => {
                    let (inbox, alive_shared, done) =
                        actors.alive.as_ref().expect("a live slot has an actor");
                    assert!(Arc::ptr_eq(alive_shared, shared));
                    if !inbox.closed.get() {
                        let unprocessed = inbox.got.borrow()[*done..]
                            .iter()
                            .filter(|m| m.class == Class::Turn)
                            .count();
                        assert_eq!(shared.pending.load(Ordering::Acquire), unprocessed);
                    }
                }
                Some(Slot::Stopping { next, held, .. }) => {
                    assert!(
                        actors.alive.is_some(),
                        "a stopping slot's actor has not ended"
                    );
                    assert_eq!(next.pending.load(Ordering::Acquire), count_turns(held));
                }
            }
        }
    }

    /// Every routed message is in exactly one place.
    fn check_ledger(&self) {
        let mut seen: HashMap<u64, &str> = HashMap::new();
        let mut put = |id: u64, place: &'static str| {
            if let Some(before) = seen.insert(id, place) {
                panic!("message {id} is both {before} and {place}");
            }
        };
        for id in &self.ledger.refused {
            put(*id, "refused");
        }
        for id in &self.ledger.answered {
            put(*id, "answered");
        }
        for id in &self.ledger.processed {
            put(*id, "processed");
        }
        for id in &self.ledger.died {
            put(*id, "lost with a dead actor");
        }
        for k in &self.keys {
            for id in held_ids(&self.m, k).into_iter().filter(|id| *id != 0) {
                put(id, "held");
            }
        }
        for actors in &self.actors {
            if let Some((inbox, _, done)) = &actors.alive {
                for m in &inbox.got.borrow()[*done..] {
                    if m.id != 0 {
                        put(m.id, "in a mailbox");
                    }
                }
            }
        }
        for id in 1..=self.ledger.routed {
            assert!(seen.contains_key(&id), "message {id} was lost");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever order events come in: never two actors for one key, never more slots than the
    /// capacity, pending counts that match what waits, and every message in exactly one place.
    #[test]
    fn random_event_sequences_keep_the_registry_invariants(ops in prop::collection::vec(op(), 1..80)) {
        let mut h = Harness::new();
        for op in ops {
            h.apply(op);
            h.check_ledger();
        }
    }
}
