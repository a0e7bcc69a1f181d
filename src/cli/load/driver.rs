//! The workload: closed-loop callers sending bursts of one session's turns, optional interrupts
//! sent mid-turn, and a sampler of live sessions, memory and progress.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, OptionFuture};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstile::SessionKey;

use super::ack_log::AckLog;
use super::ledger::{input_text, Ledger};
use super::rss::rss_bytes;
use super::target::{Ack, Failure, Target};

/// Latency histograms, shared by callers in stripes: one per caller would cost ~160 KB each
/// (10,000 callers: 1.6 GB), one for all would be a hot lock.
const HISTOGRAM_STRIPES: usize = 16;
/// Longest latency recorded exactly (10 minutes, in µs); longer ones are clamped to it.
const MAX_LATENCY_US: u64 = 600_000_000;
/// How often the sampler reads live sessions, RSS and progress.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Which turns are interrupted. The interrupt is sent when the turn has streamed its first
/// chunk, so it lands while the turn runs, whatever the machine's speed.
#[derive(Debug, Clone, Copy)]
pub struct Interrupts {
    /// Fraction of turns to interrupt.
    pub rate: f64,
    /// Makes the choice of turns reproducible.
    pub seed: u64,
}

impl Interrupts {
    /// Whether this turn is one of the interrupted ones: a fixed pseudo-random choice.
    pub fn chosen(&self, session: usize, turn: usize) -> bool {
        let mixed = splitmix64(self.seed ^ splitmix64(((session as u64) << 24) ^ turn as u64));
        (mixed as f64 / u64::MAX as f64) < self.rate
    }
}

/// SplitMix64: a small, well-spread hash, enough to pick turns evenly.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The shape of the workload.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Distinct sessions.
    pub sessions: usize,
    /// Turns per session.
    pub turns: usize,
    /// Closed-loop callers.
    pub callers: usize,
    /// Turns of one session a caller sends at once (its last burst may be shorter).
    pub burst: usize,
    /// How long a caller pauses after each burst's answers (not counted in latency).
    pub think: Duration,
    /// Interrupts, if any.
    pub interrupts: Option<Interrupts>,
}

/// Everything the callers share.
pub struct Shared<T> {
    /// The design under load.
    pub target: Arc<T>,
    /// Session `i` is `keys[i]`.
    pub keys: Arc<[SessionKey]>,
    /// What was acknowledged.
    pub ledger: Arc<Ledger>,
    /// `--ack-log`, if given.
    pub ack_log: Option<Arc<AckLog>>,
    /// See [`HISTOGRAM_STRIPES`]; allocated before the run so it is not counted as growth.
    pub latencies: Box<[Mutex<Histogram<u64>>]>,
}

impl<T> Shared<T> {
    /// Allocates the shared parts for `plan`.
    pub fn new(
        target: Arc<T>,
        keys: Arc<[SessionKey]>,
        plan: &Plan,
        ack_log: Option<Arc<AckLog>>,
    ) -> Result<Self, String> {
        let histogram = Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
            .map_err(|e| format!("cannot make a latency histogram: {e}"))?;
        Ok(Self {
            target,
            keys,
            ledger: Arc::new(Ledger::new(plan.sessions, plan.turns)),
            ack_log,
            latencies: (0..HISTOGRAM_STRIPES)
                .map(|_| Mutex::new(histogram.clone()))
                .collect(),
        })
    }

    /// Records one turn's answer, as it arrives.
    fn record(
        &self,
        caller: usize,
        session: usize,
        turn: usize,
        took: Duration,
        result: Result<Ack, Failure>,
    ) {
        match result {
            Ok(ack) => {
                self.ledger.ack(session, turn, ack);
                if let Some(log) = &self.ack_log {
                    log.record(&self.keys[session], ack.seq);
                }
                let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                self.latencies[caller % HISTOGRAM_STRIPES]
                    .lock()
                    .saturating_record(micros.max(1));
            }
            Err(failure) => self.ledger.fail(session, turn, failure),
        }
    }

    /// Every stripe merged.
    pub fn latencies(&self) -> Histogram<u64> {
        let mut all = self.latencies[0].lock().clone();
        for stripe in &self.latencies[1..] {
            // Same bounds everywhere, so adding cannot fail.
            let _ = all.add(&*stripe.lock());
        }
        all
    }
}

/// What the sampler saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// The most live sessions seen.
    pub peak_live: usize,
    /// RSS when that many were live.
    pub rss_at_peak_live: u64,
}

impl Sample {
    fn observe(&mut self, live: usize, rss: u64) {
        // `>=`: sessions at the same count hold more memory later (their history grows).
        if live >= self.peak_live {
            self.peak_live = live;
            self.rss_at_peak_live = rss;
        }
    }
}

/// Runs the workload to the end; returns its duration and what the sampler saw (including a
/// last sample after the callers finished, while every session is still live).
pub async fn drive<T: Target>(
    shared: Arc<Shared<T>>,
    plan: Plan,
    progress: ProgressBar,
) -> (Duration, Sample) {
    let stop = CancellationToken::new();
    let sampler = tokio::spawn(sample(shared.clone(), progress.clone(), stop.clone()));
    let started = Instant::now();
    let callers: Vec<_> = (0..plan.callers)
        .map(|caller| tokio::spawn(run_caller(shared.clone(), plan, caller)))
        .collect();
    for caller in callers {
        if let Err(err) = caller.await {
            tracing::error!(%err, "a load caller panicked");
        }
    }
    let elapsed = started.elapsed();
    stop.cancel();
    let mut seen = sampler.await.unwrap_or_default();
    seen.observe(shared.target.live_sessions(), rss_bytes());
    progress.set_position(shared.ledger.done());
    progress.finish_and_clear();
    (elapsed, seen)
}

/// One closed-loop caller. Caller `c` owns sessions `c, c + callers, …`, so no two callers ever
/// send turns of one session. It sends each session its turns in bursts of `plan.burst`, in
/// order, and waits for a burst's answers before the session's next burst; every session gets
/// its first burst before any gets its second, as in a conversation-heavy service.
async fn run_caller<T: Target>(shared: Arc<Shared<T>>, plan: Plan, caller: usize) {
    if !plan.think.is_zero() {
        // Callers start spread evenly over one think time, as users do; started together they
        // would arrive in waves of every caller at once.
        let offset = plan.think.mul_f64(caller as f64 / plan.callers as f64);
        tokio::time::sleep(offset).await;
    }
    for first in (0..plan.turns).step_by(plan.burst) {
        let turns = first..(first + plan.burst).min(plan.turns);
        for session in (caller..plan.sessions).step_by(plan.callers) {
            run_burst(&shared, plan, caller, session, turns.clone()).await;
            if !plan.think.is_zero() {
                tokio::time::sleep(plan.think).await;
            }
        }
    }
}

/// Sends `turns` of one session, each admitted before the next is sent (so the session's order
/// is the turns' order), then waits for all their answers.
async fn run_burst<T: Target>(
    shared: &Shared<T>,
    plan: Plan,
    caller: usize,
    session: usize,
    turns: Range<usize>,
) {
    let key = &shared.keys[session];
    let target = shared.target.as_ref();
    let mut answers = Vec::with_capacity(turns.len());
    for turn in turns {
        let (signal, first_chunk) = match plan.interrupts {
            Some(i) if i.chosen(session, turn) => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
            _ => (None, None),
        };
        let sent = Instant::now();
        let pending = target.send(key, input_text(session, turn), signal).await;
        answers.push(async move {
            let interrupter = async {
                // An error means the turn ended without a chunk: nothing to interrupt.
                if let Some(Ok(())) = OptionFuture::from(first_chunk).await {
                    target.interrupt(key);
                }
            };
            let (result, ()) = futures::join!(pending, interrupter);
            shared.record(caller, session, turn, sent.elapsed(), result);
        });
    }
    join_all(answers).await;
}

async fn sample<T: Target>(
    shared: Arc<Shared<T>>,
    progress: ProgressBar,
    stop: CancellationToken,
) -> Sample {
    let mut seen = Sample::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return seen,
        }
        seen.observe(shared.target.live_sessions(), rss_bytes());
        progress.set_position(shared.ledger.done());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_the_asked_fraction_of_turns_is_interrupted() {
        let interrupts = Interrupts { rate: 0.2, seed: 7 };
        let chosen = (0..100)
            .flat_map(|s| (0..100).map(move |t| (s, t)))
            .filter(|&(s, t)| interrupts.chosen(s, t))
            .count();
        assert!((1_800..2_200).contains(&chosen), "{chosen}");
        let none = Interrupts {
            rate: 0.0,
            ..interrupts
        };
        assert!(!(0..1000).any(|s| none.chosen(s, 0)));
    }
}
