//! The report of a load run: its figures, as a table or as one JSON object whose field names are
//! stable (see `docs/load.md`), and the process memory readings behind them.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::driver::Sample;
use super::ledger::Ledger;
use super::open_loop::{OpenLoop, StepFigures};
use super::rss::peak_rss_bytes;
use super::target::{FailureCounts, TargetCounters};
use super::verify::Verdict;

mod table;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Slowest turn.
    pub max: u64,
}

impl LatencyReport {
    /// The percentiles of `h` (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        Self {
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// The figures of one design on the workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figures {
    /// Turns acknowledged (durable).
    pub turns_ok: u64,
    /// Turns that got an error.
    pub turns_failed: u64,
    /// Acknowledged turns whose outcome was `Interrupted`.
    pub turns_interrupted: u64,
    /// Acknowledged messages whose outcome was `Superseded` (`latest`: they never ran).
    pub turns_superseded: u64,
    /// Acknowledged messages whose outcome was `Merged` (`merge`: answered by a later one's turn).
    pub turns_merged: u64,
    /// `turns_ok` per second of the run.
    pub turns_per_sec: f64,
    /// Duration of the workload, without the verification pass.
    pub elapsed_sec: f64,
    /// CPU time the whole process used over `elapsed_sec`: every thread (the runtime's, the
    /// store's, the load's own callers), user and system.
    pub cpu_sec: f64,
    /// `cpu_sec` per acknowledged turn, in microseconds (0 when none was acknowledged).
    pub cpu_us_per_turn: f64,
    /// Latency of acknowledged turns, as seen by the caller (open-loop: from the time the
    /// schedule meant to send them).
    pub latency_us: LatencyReport,
    /// Time to the first streamed chunk, from the same start as `latency_us`; `null` unless
    /// `--stream`.
    pub ttfc_us: Option<LatencyReport>,
    /// The agent's longest latency + 2 ms: the target for p99.
    pub latency_budget_us: u64,
    /// Open-loop runs: turns sent per second of the schedule; `null` for closed-loop callers.
    pub offered_rate: Option<f64>,
    /// Turns acknowledged per second of the run (the same as `turns_per_sec`), to set against
    /// `offered_rate`.
    pub achieved_rate: f64,
    /// Open-loop runs: each step's offered and achieved rate and latency; `[]` otherwise.
    pub steps: Vec<StepFigures>,
    /// With `--slo-ms`: the highest step rate whose p99 stayed within it; `null` when none did.
    pub max_rate_within_slo: Option<f64>,
    /// Share of acknowledged turns slower than `latency_budget_us` (0..1).
    pub share_over_budget: f64,
    /// Sessions loaded from the store into memory.
    pub activations: u64,
    /// `evictions_idle + evictions_lru`.
    pub evictions: u64,
    /// Sessions passivated after their idle TTL.
    pub evictions_idle: u64,
    /// Sessions passivated to stay under the capacity.
    pub evictions_lru: u64,
    /// Interrupts that reached a running turn.
    pub interrupts: u64,
    /// Calls refused by a limit (the first five of `failures_by_reason`).
    pub rejections: u64,
    /// Failed calls by reason.
    pub failures_by_reason: FailureCounts,
    /// Acknowledged turns missing from the store.
    pub lost: u64,
    /// Turns stored more than once.
    pub duplicated: u64,
    /// Stored turns out of sending order.
    pub reordered: u64,
    /// Acknowledged turns whose acknowledged sequence number does not hold their answer.
    pub misanswered: u64,
    /// Turns answered `Busy` whose input was stored anyway.
    pub busy_but_stored: u64,
    /// The most sessions held in memory at once: the larger of the design's own count and the
    /// sampler's.
    pub peak_live_sessions: usize,
    /// The most live sessions the sampler saw: the count `rss_at_peak_bytes` was read at, and
    /// the denominator of `bytes_per_live_session`.
    pub sampled_peak_live_sessions: usize,
    /// The process's peak resident set size (VmHWM).
    pub peak_rss_bytes: u64,
    /// Resident set size before the run (after the store was opened and the ledger allocated).
    pub rss_before_bytes: u64,
    /// Resident set size when the most sessions were live.
    pub rss_at_peak_bytes: u64,
    /// `(rss_at_peak_bytes - rss_before_bytes) / sampled_peak_live_sessions`.
    pub bytes_per_live_session: u64,
}

/// What [`Figures::new`] is computed from.
pub struct Measured<'a> {
    /// Acknowledgements and failures.
    pub ledger: &'a Ledger,
    /// Latencies of acknowledged turns, µs.
    pub latencies: &'a Histogram<u64>,
    /// The workload's duration.
    pub elapsed: Duration,
    /// The CPU time the process used over it.
    pub cpu: Duration,
    /// The design's own counters, read before it was finished.
    pub counters: TargetCounters,
    /// The verification pass's counts.
    pub verdict: Verdict,
    /// What the sampler saw.
    pub sample: Sample,
    /// RSS just before the first turn.
    pub rss_before: u64,
    /// The p99 target: the agent's longest latency + 2 ms.
    pub latency_budget: Duration,
    /// Times to first chunk, with `--stream`.
    pub ttfc: Option<Histogram<u64>>,
    /// The open-loop schedule's figures, with `--rate` or `--rate-curve`.
    pub open: Option<OpenLoop>,
    /// `--slo-ms`.
    pub slo: Option<Duration>,
}

impl Figures {
    /// The figures of one run.
    pub fn new(m: Measured<'_>) -> Self {
        let h = m.latencies;
        let failures = m.ledger.failures();
        let budget_us = u64::try_from(m.latency_budget.as_micros()).unwrap_or(u64::MAX);
        let ok = m.ledger.ok();
        let growth = m.sample.rss_at_peak_live.saturating_sub(m.rss_before);
        Self {
            turns_ok: ok,
            turns_failed: failures.total(),
            turns_interrupted: m.ledger.interrupted(),
            turns_superseded: m.ledger.superseded(),
            turns_merged: m.ledger.merged(),
            turns_per_sec: ok as f64 / m.elapsed.as_secs_f64().max(1e-9),
            elapsed_sec: m.elapsed.as_secs_f64(),
            cpu_sec: m.cpu.as_secs_f64(),
            cpu_us_per_turn: if ok == 0 {
                0.0
            } else {
                m.cpu.as_secs_f64() * 1e6 / ok as f64
            },
            latency_us: LatencyReport::of(h),
            ttfc_us: m.ttfc.as_ref().map(LatencyReport::of),
            latency_budget_us: budget_us,
            offered_rate: m.open.as_ref().map(|o| o.offered_rate),
            achieved_rate: ok as f64 / m.elapsed.as_secs_f64().max(1e-9),
            steps: m.open.as_ref().map(|o| o.steps.clone()).unwrap_or_default(),
            max_rate_within_slo: m.slo.and_then(|slo| {
                let slo_us = u64::try_from(slo.as_micros()).unwrap_or(u64::MAX);
                m.open
                    .as_ref()?
                    .steps
                    .iter()
                    .filter(|s| s.sent > 0 && s.latency_us.p99 <= slo_us)
                    .map(|s| s.offered_rate)
                    .reduce(f64::max)
            }),
            share_over_budget: if h.is_empty() {
                0.0
            } else {
                1.0 - h.quantile_below(budget_us)
            },
            activations: m.counters.activations,
            evictions: m.counters.evictions_idle + m.counters.evictions_lru,
            evictions_idle: m.counters.evictions_idle,
            evictions_lru: m.counters.evictions_lru,
            interrupts: m.counters.interrupts,
            rejections: failures.rejections(),
            failures_by_reason: failures,
            lost: m.verdict.lost,
            duplicated: m.verdict.duplicated,
            reordered: m.verdict.reordered,
            misanswered: m.verdict.misanswered,
            busy_but_stored: m.verdict.busy_but_stored,
            peak_live_sessions: m.counters.peak_live_sessions.max(m.sample.peak_live),
            sampled_peak_live_sessions: m.sample.peak_live,
            peak_rss_bytes: peak_rss_bytes().max(m.sample.rss_at_peak_live),
            rss_before_bytes: m.rss_before,
            rss_at_peak_bytes: m.sample.rss_at_peak_live,
            bytes_per_live_session: growth / (m.sample.peak_live.max(1) as u64),
        }
    }

    /// The share of answered turns (0 to 1) that failed, not counting `Busy` answers: under
    /// `reject` they are the policy's promise, not a failure.
    pub fn failed_share(&self) -> f64 {
        let failed = self.turns_failed - self.failures_by_reason.busy.min(self.turns_failed);
        let answered = self.turns_ok + self.turns_failed;
        if answered == 0 {
            return 0.0;
        }
        failed as f64 / answered as f64
    }

    /// Nothing lost, duplicated, reordered, misanswered or stored after `Busy`.
    pub fn is_clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.reordered == 0
            && self.misanswered == 0
            && self.busy_but_stored == 0
    }
}

/// A baseline's figures next to turnstile's, or why there are none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineFigures {
    /// The same fields as turnstile's own; absent when the baseline failed.
    #[serde(flatten)]
    pub figures: Option<Figures>,
    /// turnstile's `turns_per_sec` divided by this baseline's; absent when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnstile_throughput_ratio: Option<f64>,
    /// Why the baseline has no figures: its process could not start, or did not report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The whole report. Field names are stable; see `docs/load.md`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Distinguishes this run's sessions from earlier runs' in a persistent store.
    pub run_id: String,
    /// The store, as given.
    pub store: String,
    /// `mock` or `echo`.
    pub agent: String,
    /// Agent latency in ms: `20` or `10..50`.
    pub latency_ms: String,
    /// Chunks the mock agent streams.
    pub chunks: usize,
    /// The overlap policy.
    pub policy: String,
    /// Distinct sessions.
    pub sessions: usize,
    /// Turns per session.
    pub turns_per_session: usize,
    /// Closed-loop callers.
    pub concurrency: usize,
    /// Turns of one session sent at once.
    pub burst: usize,
    /// Milliseconds each caller pauses after a burst.
    pub think_ms: u64,
    /// Fraction of turns interrupted.
    pub interrupt_rate: f64,
    /// Threads that ran the load and the runtimes (`--worker-threads`, else one per core).
    #[serde(default)]
    pub worker_threads: usize,
    /// turnstile's figures (or, in a baseline's own process, the baseline's).
    #[serde(flatten)]
    pub figures: Figures,
    /// Baselines by name (`mutex-gate`, `ractor`); empty without `--baseline`.
    pub baseline: BTreeMap<String, BaselineFigures>,
    /// With `--cluster N`: the runtimes and how many turns went on to their session's owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFigures>,
    /// With `--target`: the URLs the workload was sent to; `null` for a run in this process.
    #[serde(default)]
    pub target: Option<Vec<String>>,
}

/// What `--cluster N` adds to the report.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ClusterFigures {
    /// Runtimes sharing the sessions.
    pub processes: usize,
    /// Turns a runtime refused as owned elsewhere and that were sent on to the owner.
    pub forwarded: u64,
}

impl Report {
    /// Whether turnstile and every baseline that ran verified clean.
    pub fn is_clean(&self) -> bool {
        self.figures.is_clean()
            && self
                .baseline
                .values()
                .all(|b| b.figures.as_ref().is_none_or(Figures::is_clean))
    }

    /// Whether every requested baseline ran and reported.
    pub fn baselines_ran(&self) -> bool {
        self.baseline.values().all(|b| b.error.is_none())
    }

    /// Prints the report as JSON or as a table.
    pub fn print(&self, json: bool) {
        if json {
            match serde_json::to_string_pretty(self) {
                Ok(text) => println!("{text}"),
                Err(err) => eprintln!("turnstile: cannot encode the report: {err}"),
            }
        } else {
            self.print_table();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(ok: u64, failed: u64, busy: u64) -> Figures {
        let mut figures = Figures {
            turns_ok: ok,
            turns_failed: failed,
            ..Figures::default()
        };
        figures.failures_by_reason.busy = busy;
        figures
    }

    /// What `--allow-failures` is compared with: failures over answered turns, `busy` excluded
    /// (under `reject` it is the promised answer, not a failure).
    #[test]
    fn the_failed_share_leaves_busy_answers_out() {
        assert_eq!(figures(0, 0, 0).failed_share(), 0.0);
        assert_eq!(figures(0, 10, 0).failed_share(), 1.0, "all failed");
        assert_eq!(figures(90, 10, 0).failed_share(), 0.1);
        assert_eq!(figures(90, 10, 10).failed_share(), 0.0, "only busy answers");
        assert_eq!(figures(90, 10, 5).failed_share(), 0.05);
    }
}
