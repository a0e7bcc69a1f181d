//! Reading the slots for the live-sessions snapshot, and passivation on request.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Mailbox, Slot, SlotMsg, Slots};
use crate::key::SessionKey;
use crate::registry::live_page::{LivePage, LiveQuery, LiveSession, LiveState};

impl<A: Mailbox> Slots<A> {
    /// A page of live sessions in key order. O(log n + page): the page starts from the key
    /// index, and each entry is a hash lookup and a few atomic loads. `stamp`: now, as a
    /// `last_active` stamp.
    pub(crate) fn live_page(&self, query: &LiveQuery, stamp: u64) -> LivePage {
        let limit = match query.limit {
            0 => LiveQuery::DEFAULT_LIMIT,
            n => n.min(LiveQuery::MAX_LIMIT),
        };
        let first = query.user.as_deref().map(SessionKey::first_of);
        let start = match (&query.after, first) {
            (Some(after), Some(first)) if *after < first => Bound::Included(first),
            (Some(after), _) => Bound::Excluded(after.clone()),
            (None, Some(first)) => Bound::Included(first),
            (None, None) => Bound::Unbounded,
        };
        let mut keys = self
            .order
            .range((start, Bound::Unbounded))
            .take_while(|key| query.user.as_deref().is_none_or(|u| key.user_id() == u))
            .take(limit + 1);
        let mut sessions = Vec::with_capacity(limit.min(self.order.len()));
        for key in keys.by_ref().take(limit) {
            if let Some(slot) = self.slots.peek(key) {
                sessions.push(describe(key, slot, stamp));
            }
        }
        let next = keys
            .next()
            .and_then(|_| sessions.last().map(|s| s.key.clone()));
        LivePage {
            sessions,
            next,
            total: self.slots.len(),
        }
    }

    /// Asks a live session to passivate (finish what is running and queued, flush, stop).
    /// Returns whether it was live; starting and stopping sessions are left as they are.
    pub(crate) fn passivate(&mut self, key: &SessionKey) -> bool {
        if !matches!(self.slots.peek(key), Some(Slot::Live { .. })) {
            return false;
        }
        self.deliver(key, A::Msg::passivate());
        true
    }
}

/// What an operator sees of one slot.
fn describe<A: Mailbox>(key: &SessionKey, slot: &Slot<A>, stamp: u64) -> LiveSession {
    let (shared, state) = match slot {
        Slot::Starting { shared, .. } => (shared, LiveState::Starting),
        Slot::Stopping { shared, .. } => (shared, LiveState::Stopping),
        Slot::Live { shared, .. } => {
            let state = match shared.pending.load(Ordering::Acquire) {
                0 => LiveState::Idle,
                1 => LiveState::Running,
                n => LiveState::Queued(n - 1),
            };
            (shared, state)
        }
    };
    let gauges = &shared.gauges;
    let last = shared.last_active.load(Ordering::Acquire);
    LiveSession {
        key: key.clone(),
        state,
        turns: gauges.turns.load(Ordering::Relaxed),
        idle_for: Duration::from_nanos(stamp.saturating_sub(last)),
        unsaved: gauges.unsaved.load(Ordering::Relaxed),
        bytes: gauges.bytes.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{machine, Fx, Inbox, Msg};
    use super::super::{Class, Effects};
    use super::*;
    use tokio::time::Instant;

    fn activate(m: &mut Slots<Inbox>, user: &str, session: &str) -> SessionKey {
        let key = SessionKey::new(user, session).unwrap();
        let mut fx: Fx = Effects::default();
        let msg = Msg {
            id: 1,
            class: Class::Other,
        };
        assert!(matches!(
            m.route(&key, msg, false, 0, &mut fx),
            super::super::Route::Accepted
        ));
        m.publish(&key, Inbox::default(), Instant::now(), &mut fx);
        key
    }

    fn ids(page: &LivePage) -> Vec<String> {
        page.sessions
            .iter()
            .map(|s| format!("{}/{}", s.key.user_id(), s.key.session_id()))
            .collect()
    }

    #[test]
    fn pages_follow_key_order_and_end_with_no_cursor() {
        let mut m = machine(100, 4);
        for (u, s) in [("b", "2"), ("a", "9"), ("b", "1"), ("c", "1"), ("a", "1")] {
            activate(&mut m, u, s);
        }
        let query = |after, limit| LiveQuery {
            user: None,
            after,
            limit,
        };
        let first = m.live_page(&query(None, 2), 0);
        assert_eq!(ids(&first), ["a/1", "a/9"]);
        assert_eq!(first.total, 5);
        let second = m.live_page(&query(first.next.clone(), 2), 0);
        assert_eq!(ids(&second), ["b/1", "b/2"]);
        let last = m.live_page(&query(second.next.clone(), 2), 0);
        assert_eq!(ids(&last), ["c/1"]);
        assert_eq!(last.next, None);
        let exact = m.live_page(&query(None, 5), 0);
        assert_eq!(exact.next, None, "no cursor when nothing follows");
    }

    #[test]
    fn a_user_filter_reads_only_that_users_range() {
        let mut m = machine(100, 4);
        for (u, s) in [("al", "x"), ("alice", "1"), ("alice", "2"), ("bob", "1")] {
            activate(&mut m, u, s);
        }
        let page = m.live_page(
            &LiveQuery {
                user: Some("alice".into()),
                after: Some(SessionKey::new("al", "x").unwrap()),
                limit: 10,
            },
            0,
        );
        assert_eq!(ids(&page), ["alice/1", "alice/2"]);
        assert_eq!(page.next, None);
    }

    #[test]
    fn states_follow_pending_turns_and_stops() {
        let mut m = machine(100, 4);
        let key = activate(&mut m, "u", "s");
        let state = |m: &Slots<Inbox>| m.live_page(&LiveQuery::default(), 0).sessions[0].state;
        assert_eq!(state(&m), LiveState::Idle);
        let mut fx: Fx = Effects::default();
        for id in 0..3 {
            let msg = Msg {
                id,
                class: Class::Turn,
            };
            let _ = m.route(&key, msg, false, 0, &mut fx);
            let want = if id == 0 {
                LiveState::Running
            } else {
                LiveState::Queued(id as usize)
            };
            assert_eq!(state(&m), want);
        }
        assert!(m.passivate(&key));
        assert_eq!(state(&m), LiveState::Stopping);
        assert!(!m.passivate(&key), "a stopping session is not live");
        let unknown = SessionKey::new("u", "other").unwrap();
        assert!(!m.passivate(&unknown));
    }
}
