//! Callers waiting for a free slot when the runtime is at capacity.
//!
//! Callers of one key that have to wait keep their order: the first waits for a slot while later
//! ones (and any newcomer for that key) queue behind it in the key's line, so a slot that frees
//! up cannot let a later message of a session start before an earlier one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use super::Registry;
use crate::key::SessionKey;

/// How often a call waiting for a free slot looks again (and so tries to evict a session that
/// went idle meanwhile). Short beside a turn, long beside the cost of one look.
pub(super) const CAPACITY_RECHECK: Duration = Duration::from_millis(100);

/// The callers of one key that wait for a free slot, in arrival order: tokio's mutex hands its
/// lock over first come, first served, so holding it is being first in line.
pub(crate) type Line = Arc<tokio::sync::Mutex<()>>;

/// Every key's line. An entry lives only while somebody waits in it.
#[derive(Default)]
pub(super) struct Lines {
    map: HashMap<SessionKey, Line>,
}

impl Lines {
    /// The line of callers waiting for `key`, if any.
    pub(super) fn waiting(&self, key: &SessionKey) -> Option<Line> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(key).cloned()
    }

    /// Opens `key`'s line with the caller first in it.
    pub(super) fn open(&mut self, key: &SessionKey) -> OwnedMutexGuard<()> {
        let line = Line::default();
        let first = line
            .clone()
            .try_lock_owned()
            .expect("a new line's lock is free");
        self.map.insert(key.clone(), line);
        first
    }

    /// Forgets `key`'s line once nobody waits in it any more.
    pub(super) fn leave(&mut self, key: &SessionKey) {
        if self
            .map
            .get(key)
            .is_some_and(|line| Arc::strong_count(line) == 1)
        {
            self.map.remove(key);
        }
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    #[cfg(test)]
    pub(super) fn contains(&self, key: &SessionKey) -> bool {
        self.map.contains_key(key)
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

/// A caller's stay in its key's line: on drop it gives up its place and, if it was the last
/// one there, removes the line.
pub(super) struct InLine<'a> {
    pub(super) registry: &'a Registry,
    pub(super) key: &'a SessionKey,
    /// Held while first in line.
    pub(super) first: Option<OwnedMutexGuard<()>>,
    /// Whether the caller ever stood in the line.
    pub(super) queued: bool,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.queued {
            // The guard holds the line too: release it before counting who is left.
            self.first = None;
            self.registry.inner.lock().lines.leave(self.key);
        }
    }
}

/// Awaits `work` until `deadline` (`None`: no deadline); `None` when the deadline came first.
pub(super) async fn until<T>(
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
    use crate::registry::RouteError;
    use crate::session::SessionMsg;
    use crate::{EchoAgent, InMemoryStore, Runtime};

    fn clear() -> SessionMsg {
        SessionMsg::ClearContext(oneshot::channel().0)
    }

    /// Callers that give up while in a line (their futures are dropped) leave nothing behind.
    #[tokio::test(start_paused = true)]
    async fn cancelled_callers_leave_no_line_behind() {
        let rt = Runtime::builder()
            .agent(crate::agent::MockLlmAgent::new().with_latency(Duration::from_secs(10)))
            .store(InMemoryStore::new())
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
        while !registry.inner.lock().lines.contains(&k) {
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
            .store(InMemoryStore::new())
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
        registry.inner.lock().lines.leave(&k);
        assert!(
            registry.inner.lock().lines.is_empty(),
            "no line is left behind"
        );
    }
}
