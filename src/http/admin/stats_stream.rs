//! `GET /v1/admin/stats/stream`: one JSON snapshot of the runtime's figures a second, rates
//! taken between consecutive snapshots.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::Event;
use futures::Stream;
use serde::Serialize;
use tokio::time::{Instant, MissedTickBehavior};

use crate::Runtime;
use crate::{RuntimeStats, TurnTimes};

/// Time between snapshots: once a second is what a person watching a chart can follow, and a
/// snapshot costs one lock for the live count plus ~140 atomic loads.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// One snapshot as sent.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Snapshot {
    /// Seconds this snapshot's rates cover (about [`PERIOD`]; 0 for the first).
    interval_s: f64,
    live_sessions: usize,
    peak_live_sessions: usize,
    activations_per_s: f64,
    evictions_per_s: f64,
    turns_per_s: f64,
    /// Of the turns answered during the interval; `null` when none was.
    turn_p50_ms: Option<f64>,
    turn_p99_ms: Option<f64>,
    /// Refused during the interval, by reason.
    rejections: Rejections,
    /// Everything counted since the runtime was built.
    totals: RuntimeStats,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct Rejections {
    overloaded: u64,
    at_capacity: u64,
    draining: u64,
    busy: u64,
}

/// What a snapshot is computed from.
#[derive(Clone)]
struct Reading {
    at: Instant,
    stats: RuntimeStats,
    times: TurnTimes,
}

impl Reading {
    fn take(runtime: &Runtime) -> Self {
        Self {
            at: Instant::now(),
            stats: runtime.stats(),
            times: runtime.turn_times(),
        }
    }
}

/// The figures between two readings.
fn snapshot(before: &Reading, now: &Reading) -> Snapshot {
    let seconds = now.at.duration_since(before.at).as_secs_f64();
    let (a, b) = (&before.stats, &now.stats);
    let rate = |then: u64, now: u64| {
        if seconds > 0.0 {
            now.saturating_sub(then) as f64 / seconds
        } else {
            0.0
        }
    };
    let interval = now.times.since(&before.times);
    let ms = |q: f64| interval.quantile(q).map(|d| d.as_secs_f64() * 1e3);
    Snapshot {
        interval_s: seconds,
        live_sessions: b.live_sessions,
        peak_live_sessions: b.peak_live_sessions,
        activations_per_s: rate(a.activations, b.activations),
        evictions_per_s: rate(
            a.evictions_idle + a.evictions_lru,
            b.evictions_idle + b.evictions_lru,
        ),
        turns_per_s: rate(a.turns, b.turns),
        turn_p50_ms: ms(0.5),
        turn_p99_ms: ms(0.99),
        rejections: Rejections {
            overloaded: b.rejected_overloaded.saturating_sub(a.rejected_overloaded),
            at_capacity: b.rejected_capacity.saturating_sub(a.rejected_capacity),
            draining: b.rejected_draining.saturating_sub(a.rejected_draining),
            busy: b.rejected_busy.saturating_sub(a.rejected_busy),
        },
        totals: *b,
    }
}

/// Snapshots every `period`, the first at once; ends when the runtime begins to drain, so
/// that an open console never holds a shutdown up.
pub(crate) fn snapshots(
    runtime: Runtime,
    period: Duration,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let first = Reading::take(&runtime);
    futures::stream::unfold(
        (runtime, ticks, first),
        |(runtime, mut ticks, before)| async move {
            ticks.tick().await;
            if runtime.is_draining() {
                return None;
            }
            let now = Reading::take(&runtime);
            let event = Event::default()
                .event("stats")
                .json_data(snapshot(&before, &now))
                .unwrap_or_else(|_| Event::default().comment("unserialisable snapshot"));
            Some((Ok(event), (runtime, ticks, now)))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_second_over_the_interval() {
        let at = Instant::now();
        let empty = crate::stats::TurnHistogram::default().snapshot();
        let before = Reading {
            at,
            stats: RuntimeStats {
                turns: 10,
                activations: 1,
                rejected_busy: 2,
                ..RuntimeStats::default()
            },
            times: empty.clone(),
        };
        let now = Reading {
            at: at + Duration::from_secs(2),
            stats: RuntimeStats {
                turns: 30,
                activations: 5,
                rejected_busy: 3,
                evictions_idle: 4,
                ..RuntimeStats::default()
            },
            times: empty,
        };
        let s = snapshot(&before, &now);
        assert_eq!(s.turns_per_s, 10.0);
        assert_eq!(s.activations_per_s, 2.0);
        assert_eq!(s.evictions_per_s, 2.0);
        assert_eq!(s.rejections.busy, 1);
        assert_eq!(s.turn_p50_ms, None, "no turn in the interval");
    }
}
