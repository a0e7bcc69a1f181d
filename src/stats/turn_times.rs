//! How long turns take, as a lock-free histogram of logarithmic buckets: every answered turn
//! bumps one atomic, and two snapshots a second apart give that second's percentiles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per doubling of the time. Four keep a percentile within 19% of the true value (the
/// ratio between two bucket bounds, 2^(1/4)), which is as fine as a chart can show.
const PER_DOUBLING: u32 = 4;

/// Buckets in all: 1 µs doubled 34 times is over four hours, past any turn deadline.
pub(crate) const BUCKETS: usize = 34 * PER_DOUBLING as usize;

/// The live histogram, updated by session actors as they answer turns.
pub(crate) struct TurnHistogram {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for TurnHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl std::fmt::Debug for TurnHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnHistogram").finish_non_exhaustive()
    }
}

impl TurnHistogram {
    /// Counts one turn that took `took`.
    pub(crate) fn record(&self, took: Duration) {
        self.buckets[bucket_of(took)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> TurnTimes {
        TurnTimes {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// The bucket of a duration: 0 up to 1 µs, then [`PER_DOUBLING`] buckets per doubling.
fn bucket_of(took: Duration) -> usize {
    let micros = took.as_secs_f64() * 1e6;
    if micros <= 1.0 {
        return 0;
    }
    let index = (micros.log2() * f64::from(PER_DOUBLING)).ceil();
    // A float in 0..BUCKETS (clamped first), so the cast neither truncates nor wraps.
    index.clamp(0.0, (BUCKETS - 1) as f64) as usize
}

/// The upper bound of a bucket.
fn bound_of(bucket: usize) -> Duration {
    let exponent = bucket as f64 / f64::from(PER_DOUBLING);
    Duration::from_secs_f64(exponent.exp2() / 1e6)
}

/// How many answered turns took how long, since the runtime was built (see
/// [`Runtime::turn_times`](crate::Runtime::turn_times)). Subtract an earlier snapshot with
/// [`TurnTimes::since`] for the turns of an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnTimes {
    counts: Box<[u64]>,
}

impl TurnTimes {
    /// Turns counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The turns counted here and not in `earlier` (an older snapshot of the same runtime).
    pub fn since(&self, earlier: &TurnTimes) -> TurnTimes {
        TurnTimes {
            counts: self
                .counts
                .iter()
                .zip(earlier.counts.iter().chain(std::iter::repeat(&0)))
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
        }
    }

    /// The time under which a share `q` (0.0..=1.0) of the counted turns finished, rounded up to
    /// its bucket's bound (at most 19% above the true value); `None` when none was counted.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // The rank of the turn wanted, 1-based; a float product of two bounded numbers, rounded up.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bound_of(bucket));
            }
        }
        Some(bound_of(BUCKETS - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_land_within_a_bucket_of_the_truth() {
        let histogram = TurnHistogram::default();
        for ms in 1..=100 {
            histogram.record(Duration::from_millis(ms));
        }
        let times = histogram.snapshot();
        assert_eq!(times.count(), 100);
        let p50 = times.quantile(0.5).unwrap();
        let p99 = times.quantile(0.99).unwrap();
        assert!(
            p50 >= Duration::from_millis(50) && p50 <= Duration::from_millis(60),
            "{p50:?}"
        );
        assert!(
            p99 >= Duration::from_millis(99) && p99 <= Duration::from_millis(118),
            "{p99:?}"
        );
    }

    #[test]
    fn an_interval_holds_only_its_own_turns() {
        let histogram = TurnHistogram::default();
        histogram.record(Duration::from_secs(2));
        let before = histogram.snapshot();
        histogram.record(Duration::from_micros(10));
        let interval = histogram.snapshot().since(&before);
        assert_eq!(interval.count(), 1);
        assert!(interval.quantile(1.0).unwrap() < Duration::from_micros(20));
        assert_eq!(before.since(&before).quantile(0.5), None);
    }

    #[test]
    fn extremes_stay_in_range() {
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(Duration::from_secs(1 << 40)), BUCKETS - 1);
    }
}
