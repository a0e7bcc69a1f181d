//! Open-loop arrivals (`--rate`, `--rate-curve`): turns are sent on a schedule, whatever the
//! service's speed, and each turn's latency is measured from the moment the schedule meant to
//! send it. A closed-loop caller waits for its answer before sending again, so a slow service
//! slows the generator down and hides its own queueing (coordinated omission); here a stall shows
//! in the percentiles.
//!
//! Arrival `i` is turn `i / sessions` of session `i % sessions`: every session gets its first
//! turn before any gets its second. A session's turns are admitted in order (each waits until
//! the previous one has its place in the session's FIFO), then run concurrently with the rest.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::driver::{Plan, Shared};
use super::ledger::input_text;
use super::report::LatencyReport;
use super::target::Target;

/// One step of a rate curve: `rate` turns per second for `duration`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Turns per second.
    pub rate: f64,
    /// How long; `None` (a plain `--rate`) runs until every turn was sent.
    pub duration: Option<Duration>,
}

/// `--rate-curve 100:30s,500:30s,…`: steps of arrival rates.
#[derive(Debug, Clone, PartialEq)]
pub struct RateCurve(pub Vec<Step>);

/// Highest accepted rate: far above what one process can serve, low enough that arrival times
/// stay exact in nanoseconds.
const MAX_RATE: f64 = 10_000_000.0;

/// Parses a rate: a positive number of turns per second.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate <= MAX_RATE => Ok(rate),
        _ => Err(format!(
            "bad rate {text:?}; expected turns per second, above 0 and at most {MAX_RATE}"
        )),
    }
}

impl FromStr for RateCurve {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let expected = "expected steps like 100:30s,500:30s (turns per second : seconds)";
        let steps = s
            .split(',')
            .map(|step| {
                let (rate, secs) = step
                    .split_once(':')
                    .ok_or_else(|| format!("bad step {step:?}; {expected}"))?;
                let secs = secs.trim().trim_end_matches('s');
                let duration = secs
                    .parse::<f64>()
                    .ok()
                    .filter(|d| *d > 0.0 && *d <= 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| format!("bad duration in {step:?}; {expected}"))?;
                Ok(Step {
                    rate: parse_rate(rate)?,
                    duration: Some(duration),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self(steps))
    }
}

/// What one step of the schedule achieved.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct StepFigures {
    /// The step's arrival rate, turns per second.
    pub offered_rate: f64,
    /// Turns the step sent.
    pub sent: u64,
    /// Turns sent in this step and acknowledged, per second of the step.
    pub achieved_rate: f64,
    /// Latency of the step's acknowledged turns, from their intended send time.
    pub latency_us: LatencyReport,
}

/// What an open-loop run adds to the report.
#[derive(Debug, Clone)]
pub struct OpenLoop {
    /// Turns sent per second of the schedule.
    pub offered_rate: f64,
    /// One entry per step.
    pub steps: Vec<StepFigures>,
}

/// The state shared by the arrivals of one run.
struct Arrivals {
    /// Per session: the turn whose admission comes next.
    next: Box<[AtomicUsize]>,
    /// Wakes arrivals waiting for their session's previous turn to be admitted.
    admitted: Notify,
    /// Per step: latencies from the intended send time, and acknowledged turns.
    steps: Box<[(Mutex<Histogram<u64>>, AtomicU64)]>,
}

/// Sends the workload's turns on `steps`' schedule until every turn was sent or the schedule
/// ends; returns when every sent turn was answered, with the schedule's figures.
pub async fn drive_open<T: Target>(
    shared: Arc<Shared<T>>,
    plan: Plan,
    steps: &[Step],
    until: Option<std::time::Instant>,
) -> Result<OpenLoop, String> {
    let until = until.map(Instant::from_std);
    let histogram = Histogram::new_with_bounds(1, super::driver::MAX_LATENCY_US, 3)
        .map_err(|e| format!("cannot make a latency histogram: {e}"))?;
    let arrivals = Arc::new(Arrivals {
        next: (0..plan.sessions).map(|_| AtomicUsize::new(0)).collect(),
        admitted: Notify::new(),
        steps: steps
            .iter()
            .map(|_| (Mutex::new(histogram.clone()), AtomicU64::new(0)))
            .collect(),
    });
    let total = plan.sessions * plan.turns;
    let start = Instant::now();
    let mut sent = 0usize;
    let mut tasks = Vec::new();
    let mut step_start = start;
    // Per step: turns sent, and how long the step lasted (shorter than asked when the turns ran
    // out: a step is over once its last turn was due and one interval passed).
    let mut sent_per_step = Vec::with_capacity(steps.len());
    let mut spans = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let interval = Duration::from_secs_f64(1.0 / step.rate);
        let mut in_step = 0u64;
        loop {
            let due = step_start + interval.mul_f64(in_step as f64);
            let over = until.is_some_and(|until| due >= until);
            if sent == total || over || step.duration.is_some_and(|d| due >= step_start + d) {
                break;
            }
            tokio::time::sleep_until(due).await;
            let (session, turn) = (sent % plan.sessions, sent / plan.sessions);
            let (shared, arrivals) = (shared.clone(), arrivals.clone());
            tasks.push(tokio::spawn(async move {
                arrive(&shared, &arrivals, index, session, turn, due).await;
            }));
            sent += 1;
            in_step += 1;
        }
        let ran = interval.mul_f64(in_step as f64);
        let cut = until.is_some_and(|until| step_start + ran >= until);
        let span = match step.duration {
            Some(duration) if sent < total && !cut => duration,
            _ => ran,
        };
        sent_per_step.push(in_step);
        spans.push(span);
        step_start += span;
        if sent == total || cut {
            break;
        }
    }
    let schedule = step_start.duration_since(start);
    for task in tasks {
        if let Err(err) = task.await {
            tracing::error!(%err, "a load arrival panicked");
        }
    }
    let figures = steps
        .iter()
        .zip(arrivals.steps.iter())
        .zip(sent_per_step.iter().zip(&spans))
        .map(|((step, (latencies, acked)), (&sent, span))| {
            let h = latencies.lock();
            let seconds = span.as_secs_f64().max(1e-9);
            StepFigures {
                offered_rate: step.rate,
                sent,
                achieved_rate: acked.load(Ordering::Relaxed) as f64 / seconds,
                latency_us: LatencyReport::of(&h),
            }
        })
        .collect();
    Ok(OpenLoop {
        offered_rate: sent as f64 / schedule.as_secs_f64().max(1e-9),
        steps: figures,
    })
}

/// One arrival: waits for its session's previous turn to be admitted, sends, records the
/// answer with its latency from `due`.
async fn arrive<T: Target>(
    shared: &Shared<T>,
    arrivals: &Arrivals,
    step: usize,
    session: usize,
    turn: usize,
    due: Instant,
) {
    loop {
        let admitted = arrivals.admitted.notified();
        tokio::pin!(admitted);
        admitted.as_mut().enable();
        if arrivals.next[session].load(Ordering::Acquire) == turn {
            break;
        }
        admitted.await;
    }
    let key = &shared.keys[session];
    let (signal, first_chunk) = shared.first_chunk_signal(session, turn);
    let pending = shared
        .target
        .send(key, input_text(session, turn), signal)
        .await;
    arrivals.next[session].store(turn + 1, Ordering::Release);
    arrivals.admitted.notify_waiters();
    let result = shared
        .await_answer(key, pending, first_chunk, due.into_std())
        .await;
    let took = due.elapsed();
    if result.is_ok() {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let (latencies, acked) = &arrivals.steps[step];
        latencies.lock().saturating_record(micros.max(1));
        acked.fetch_add(1, Ordering::Relaxed);
    }
    shared.record(session, session, turn, took, result);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_curves_parse_or_say_what_is_expected() {
        let curve: RateCurve = "100:30s,500:1.5".parse().unwrap();
        assert_eq!(
            curve.0,
            [
                Step {
                    rate: 100.0,
                    duration: Some(Duration::from_secs(30))
                },
                Step {
                    rate: 500.0,
                    duration: Some(Duration::from_millis(1500))
                }
            ]
        );
        for bad in ["", "100", "0:10s", "100:0s", "-5:1s", "x:1s", "100:1h"] {
            let err = bad.parse::<RateCurve>().unwrap_err();
            assert!(err.contains("expected"), "{bad}: {err}");
        }
        assert!(parse_rate("nan").is_err());
        assert_eq!(parse_rate("250"), Ok(250.0));
    }
}
