//! Counters the runtime keeps about itself, for reports and tests. Also exported through the
//! `metrics` crate under `turnstile_*` names (see `docs/runtime-semantics.md`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod turn_times;

pub(crate) use turn_times::TurnHistogram;
pub use turn_times::TurnTimes;

/// Counts one store round trip that failed, by store (`redis`, `postgres`…) and operation
/// (`append`, `read`, `load`, `claim`, `renew`, `probe`): `turnstile_store_errors_total`, what an
/// operator alerts on. Both labels come from fixed sets, never from a peer.
pub(crate) fn store_error(store: &'static str, op: &'static str) {
    metrics::counter!("turnstile_store_errors_total", "store" => store, "op" => op).increment(1);
}

/// Every code `turnstile_turn_errors_total` counts by: [`Error::code`](crate::Error::code)'s
/// codes, the agent's failures' among them.
const TURN_ERROR_CODES: [&str; 28] = [
    "invalid_key",
    "too_large",
    "busy",
    "overloaded",
    "at_capacity",
    "concurrency_limit_exceeded",
    "draining",
    "agent_failed",
    "model_rate_limited",
    "model_unavailable",
    "model_timeout",
    "model_refused",
    "model_malformed",
    "not_owner",
    "fenced",
    "not_replicated",
    "store",
    "activation",
    "deleted",
    "session_failed",
    "already_exists",
    "not_found",
    "invalid_request",
    "request_mismatch",
    "timeout",
    "owned_elsewhere",
    "artifact_store",
    "memory",
];

/// Creates the counters an operator alerts on at 0 in the installed `metrics` recorder —
/// `turnstile_turn_errors_total` for every code, `turnstile_leases_lost_total` for every reason,
/// `turnstile_lease_renewals_total` for every outcome and
/// `turnstile_redis_degraded_appends_total` — so that they are exported from the
/// start: an alert on their rate (Prometheus' `rate()`, `increase()`) needs a series that
/// existed before its first increment, or it misses that increment. Cheap; call it once the
/// recorder is installed (`Gateway::with_metrics` does).
pub fn publish_alert_counters() {
    for code in TURN_ERROR_CODES {
        metrics::counter!("turnstile_turn_errors_total", "code" => code).increment(0);
    }
    for reason in ["write", "refused", "lapsed"] {
        metrics::counter!("turnstile_leases_lost_total", "reason" => reason).increment(0);
    }
    for outcome in ["renewed", "lost", "unanswered"] {
        metrics::counter!("turnstile_lease_renewals_total", "outcome" => outcome).increment(0);
    }
    // Named here, not taken from the Redis store: it exists with every store, at 0.
    metrics::counter!("turnstile_redis_degraded_appends_total").increment(0);
}

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
    pub rejected_busy: AtomicU64,
    pub interrupts: AtomicU64,
    pub peak_live: AtomicU64,
    /// Turn messages answered (completed, interrupted, superseded, merged or failed).
    pub turns: AtomicU64,
    /// How long those answers took from admission.
    pub turn_times: TurnHistogram,
}

/// Something the runtime did, recorded once: in [`Counters`] (for [`RuntimeStats`]) and in the
/// `metrics` recorder (for `/metrics`), so that the two never disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuntimeEvent {
    /// A session's actor is up.
    Activated,
    /// A session could not be loaded.
    ActivationFailed,
    /// A session was asked to passivate.
    Evicted(Eviction),
    /// A session's actor ended.
    Stopped,
    /// A session's actor ended without being asked.
    UnexpectedStop,
    /// A message was refused.
    Rejected(Rejection),
    /// An interrupt reached a running turn.
    Interrupted,
    /// Slots held now.
    Live(usize),
    /// How many messages a turn found ahead of it in its session.
    QueueDepth(usize),
}

/// Why a session was evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// Idle past its TTL.
    Idle,
    /// Least recently used, to make room under the capacity.
    Lru,
}

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// The session's queue was full.
    Overloaded,
    /// The runtime was at capacity.
    AtCapacity,
    /// The runtime was draining.
    Draining,
    /// The session was busy and the message asked for `Reject`.
    Busy,
}

impl Counters {
    /// Records one event in the counters and in the `metrics` recorder.
    pub(crate) fn record(&self, event: RuntimeEvent) {
        let bump = |counter: &AtomicU64| {
            counter.fetch_add(1, Ordering::Relaxed);
        };
        match event {
            RuntimeEvent::Activated => {
                bump(&self.activations);
                metrics::counter!("turnstile_activations_total").increment(1);
            }
            RuntimeEvent::ActivationFailed => bump(&self.activation_failures),
            RuntimeEvent::Evicted(reason) => {
                let label = match reason {
                    Eviction::Idle => {
                        bump(&self.evictions_idle);
                        "idle"
                    }
                    Eviction::Lru => {
                        bump(&self.evictions_lru);
                        "lru"
                    }
                };
                metrics::counter!("turnstile_evictions_total", "reason" => label).increment(1);
            }
            RuntimeEvent::Stopped => bump(&self.stops),
            RuntimeEvent::UnexpectedStop => bump(&self.unexpected_stops),
            RuntimeEvent::Rejected(reason) => {
                let label = match reason {
                    Rejection::Overloaded => {
                        bump(&self.rejected_overloaded);
                        "overloaded"
                    }
                    Rejection::AtCapacity => {
                        bump(&self.rejected_capacity);
                        "at_capacity"
                    }
                    Rejection::Draining => {
                        bump(&self.rejected_draining);
                        "draining"
                    }
                    Rejection::Busy => {
                        bump(&self.rejected_busy);
                        "busy"
                    }
                };
                metrics::counter!("turnstile_rejections_total", "reason" => label).increment(1);
            }
            RuntimeEvent::Interrupted => {
                bump(&self.interrupts);
                metrics::counter!("turnstile_interrupts_total").increment(1);
            }
            RuntimeEvent::Live(live) => {
                self.peak_live.fetch_max(live as u64, Ordering::Relaxed);
                metrics::gauge!("turnstile_live_sessions").set(live as f64);
            }
            RuntimeEvent::QueueDepth(depth) => {
                metrics::histogram!("turnstile_queue_depth").record(depth as f64);
            }
        }
    }

    /// Records one answered turn message that took `took` from its admission.
    pub(crate) fn turn_answered(&self, took: Duration) {
        self.turns.fetch_add(1, Ordering::Relaxed);
        self.turn_times.record(took);
    }

    pub(crate) fn snapshot(&self, live_sessions: usize, idle_timers: usize) -> RuntimeStats {
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
            rejected_busy: get(&self.rejected_busy),
            interrupts: get(&self.interrupts),
            turns: get(&self.turns),
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
    /// Messages answered `Busy` (the session was busy and the message asked for `Reject`).
    pub rejected_busy: u64,
    /// Interrupts that reached a running turn.
    pub interrupts: u64,
    /// Turn messages answered, whatever the outcome (their times: [`Runtime::turn_times`]).
    ///
    /// [`Runtime::turn_times`]: crate::Runtime::turn_times
    pub turns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, FailureKind};

    #[test]
    fn every_turn_error_code_is_published() {
        for kind in FailureKind::ALL {
            assert!(TURN_ERROR_CODES.contains(&kind.code()), "{kind:?}");
        }
        for error in [
            Error::Draining,
            Error::InvalidRequest(String::new()),
            Error::Timeout(Duration::from_secs(1)),
        ] {
            assert!(TURN_ERROR_CODES.contains(&error.code()), "{error:?}");
        }
        let mut unique = TURN_ERROR_CODES.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), TURN_ERROR_CODES.len());
    }
}
