//! What both baselines keep per run: their sessions in a striped map, and the counters the
//! report reads.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use turnstile::SessionKey;

use super::super::target::TargetCounters;

/// Stripes of the session map, so that the map's own lock is not what a baseline measures.
const SHARDS: usize = 16;

/// One stripe of the session map.
pub type Shard<V> = Mutex<HashMap<SessionKey, Arc<V>>>;

/// A baseline's sessions by key, with its activation and interrupt counts.
pub struct Sessions<V> {
    shards: Box<[Shard<V>]>,
    /// Sessions started (loaded from the store).
    pub activations: AtomicU64,
    /// Turns interrupted.
    pub interrupts: AtomicU64,
}

impl<V> Sessions<V> {
    /// No sessions yet.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            activations: AtomicU64::new(0),
            interrupts: AtomicU64::new(0),
        }
    }

    /// The stripe that holds `key`.
    pub fn shard(&self, key: &SessionKey) -> &Shard<V> {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        &self.shards[(hash as usize) % SHARDS]
    }

    /// The session of `key`, if it has one.
    pub fn get(&self, key: &SessionKey) -> Option<Arc<V>> {
        self.shard(key).lock().get(key).cloned()
    }

    /// Cancels the running turn's token, if a turn runs; counts it.
    pub fn interrupt(&self, running: &Mutex<Option<CancellationToken>>) -> bool {
        let token = running.lock().clone();
        token.is_some_and(|token| {
            token.cancel();
            self.interrupts.fetch_add(1, Ordering::Relaxed);
            true
        })
    }

    /// Sessions in the map.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// The report's counters: every session stays in the map, so the live count is the peak.
    pub fn counters(&self) -> TargetCounters {
        TargetCounters {
            activations: self.activations.load(Ordering::Relaxed),
            interrupts: self.interrupts.load(Ordering::Relaxed),
            peak_live_sessions: self.len(),
            ..TargetCounters::default()
        }
    }
}
