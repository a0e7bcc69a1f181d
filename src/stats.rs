//! Counters the runtime keeps about itself, for reports and tests. Also exported through the
//! `metrics` crate under `turnstile_*` names (see `docs/runtime-semantics.md`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, updated lock-free.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub activations: AtomicU64,
    pub activation_failures: AtomicU64,
    pub evictions_idle: AtomicU64,
    pub evictions_lru: AtomicU64,
    pub stops: AtomicU64,
    pub unexpected_stops: AtomicU64,
    pub rejected_overloaded: AtomicU64,
    pub rejected_capacity: AtomicU64,
    pub rejected_draining: AtomicU64,
    pub interrupts: AtomicU64,
    pub peak_live: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self, live_sessions: usize, idle_timers: usize) -> RuntimeStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RuntimeStats {
            live_sessions,
            peak_live_sessions: get(&self.peak_live) as usize,
            idle_timers,
            activations: get(&self.activations),
            activation_failures: get(&self.activation_failures),
            evictions_idle: get(&self.evictions_idle),
            evictions_lru: get(&self.evictions_lru),
            stops: get(&self.stops),
            unexpected_stops: get(&self.unexpected_stops),
            rejected_overloaded: get(&self.rejected_overloaded),
            rejected_capacity: get(&self.rejected_capacity),
            rejected_draining: get(&self.rejected_draining),
            interrupts: get(&self.interrupts),
        }
    }
}

/// A snapshot of the runtime's counters since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeStats {
    /// Sessions held by the registry now (starting, live or stopping).
    pub live_sessions: usize,
    /// The most sessions held at once since the runtime was built; never above the capacity.
    pub peak_live_sessions: usize,
    /// Idle timers armed in the reaper: one per live session, none left behind by stopped ones.
    pub idle_timers: usize,
    /// Session actors started (each one loaded its session once).
    pub activations: u64,
    /// Activations that failed (the store could not load the session).
    pub activation_failures: u64,
    /// Sessions passivated after their idle TTL.
    pub evictions_idle: u64,
    /// Sessions passivated to make room under the capacity.
    pub evictions_lru: u64,
    /// Session actors that stopped, for any reason.
    pub stops: u64,
    /// Session actors that stopped without being asked (a bug; their callers got
    /// `SessionFailed`).
    pub unexpected_stops: u64,
    /// Calls refused because the session's queue was full.
    pub rejected_overloaded: u64,
    /// Calls refused because the runtime was at capacity.
    pub rejected_capacity: u64,
    /// Calls refused because the runtime was draining.
    pub rejected_draining: u64,
    /// Interrupts that reached a running turn.
    pub interrupts: u64,
}
