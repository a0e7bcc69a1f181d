//! The workload: closed-loop callers sending bursts of one session's turns, optional interrupts
//! sent mid-turn, and a sampler of live sessions, memory and progress.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstile::SessionKey;

use super::ack_log::AckLog;
use super::ledger::{input_text, Ledger};
use super::open_loop::{drive_open, OpenLoop, Step};
use super::rss::{cpu_time, rss_bytes};
use super::target::{Ack, Failure, Target};

/// Latency histograms, shared by callers in stripes: one per caller would cost ~160 KB each
/// (10,000 callers: 1.6 GB), one for all would be a hot lock.
const HISTOGRAM_STRIPES: usize = 16;
/// Longest latency recorded exactly (10 minutes, in µs); longer ones are clamped to it.
pub const MAX_LATENCY_US: u64 = 600_000_000;
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
    /// Measure the time to each turn's first streamed chunk (`--stream`).
    pub ttfc: bool,
    /// No turn is sent after this long (`--duration`); turns already sent are answered.
    pub duration: Option<Duration>,
}

/// A turn's first streamed chunk, awaited while its answer comes: it is timed (`--stream`) and
/// may be the moment to interrupt the turn.
pub struct FirstChunk {
    signal: oneshot::Receiver<()>,
    interrupt: bool,
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
    /// Times to first chunk, striped like `latencies`; empty unless `--stream`.
    pub ttfc: Box<[Mutex<Histogram<u64>>]>,
    /// Which turns are interrupted.
    interrupts: Option<Interrupts>,
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
            ttfc: (0..if plan.ttfc { HISTOGRAM_STRIPES } else { 0 })
                .map(|_| Mutex::new(histogram.clone()))
                .collect(),
            interrupts: plan.interrupts,
        })
    }

    /// The first-chunk signal to hand to `Target::send` for this turn, when its first chunk
    /// matters: it is timed (`--stream`) or interrupts the turn.
    pub fn first_chunk_signal(
        &self,
        session: usize,
        turn: usize,
    ) -> (Option<oneshot::Sender<()>>, Option<FirstChunk>) {
        let interrupt = self.interrupts.is_some_and(|i| i.chosen(session, turn));
        if !interrupt && self.ttfc.is_empty() {
            return (None, None);
        }
        let (tx, rx) = oneshot::channel();
        let first = FirstChunk {
            signal: rx,
            interrupt,
        };
        (Some(tx), Some(first))
    }

    /// Every time-to-first-chunk stripe merged; `None` unless `--stream`.
    pub fn ttfc(&self) -> Option<Histogram<u64>> {
        let (first, rest) = self.ttfc.split_first()?;
        let mut all = first.lock().clone();
        for stripe in rest {
            let _ = all.add(&*stripe.lock());
        }
        Some(all)
    }

    /// Records one turn's answer, as it arrives.
    pub fn record(
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

impl<T: Target> Shared<T> {
    /// Awaits a sent turn's answer; meanwhile, at its first chunk, times it from `sent` and
    /// interrupts it if it is one of the interrupted turns.
    pub async fn await_answer(
        &self,
        key: &SessionKey,
        pending: super::target::Pending<'_>,
        first_chunk: Option<FirstChunk>,
        sent: Instant,
    ) -> Result<Ack, Failure> {
        let watcher = async {
            let Some(first) = first_chunk else {
                return;
            };
            // An error means the turn ended without a chunk: nothing to time or interrupt.
            if first.signal.await.is_ok() {
                if let Some(stripe) = self.ttfc.get(key_stripe(key)) {
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    stripe.lock().saturating_record(micros.max(1));
                }
                if first.interrupt {
                    self.target.interrupt(key).await;
                }
            }
        };
        let (result, ()) = futures::join!(pending, watcher);
        result
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

/// Runs the workload to the end; returns its duration, the CPU time the process used meanwhile,
/// and what the sampler saw (including a last sample after the callers finished, while every
/// session is still live).
///
/// With `schedule`, turns arrive open-loop on it (see `open_loop`) instead of from closed-loop
/// callers, and its figures come back too.
pub async fn drive<T: Target>(
    shared: Arc<Shared<T>>,
    plan: Plan,
    progress: ProgressBar,
    schedule: Option<&[Step]>,
) -> Result<(Duration, Duration, Sample, Option<OpenLoop>), String> {
    let stop = CancellationToken::new();
    let sampler = tokio::spawn(sample(shared.clone(), progress.clone(), stop.clone()));
    let started = Instant::now();
    let cpu_before = cpu_time();
    let until = plan.duration.map(|d| started + d);
    let open = match schedule {
        Some(steps) => Some(drive_open(shared.clone(), plan, steps, until).await?),
        None => {
            let callers: Vec<_> = (0..plan.callers)
                .map(|caller| tokio::spawn(run_caller(shared.clone(), plan, caller, until)))
                .collect();
            for caller in callers {
                if let Err(err) = caller.await {
                    tracing::error!(%err, "a load caller panicked");
                }
            }
            None
        }
    };
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_before);
    stop.cancel();
    let mut seen = sampler.await.unwrap_or_default();
    seen.observe(shared.target.live_sessions(), rss_bytes());
    progress.set_position(shared.ledger.done());
    progress.finish_and_clear();
    Ok((elapsed, cpu, seen, open))
}

/// One closed-loop caller. Caller `c` owns sessions `c, c + callers, …`, so no two callers ever
/// send turns of one session. It sends each session its turns in bursts of `plan.burst`, in
/// order, and waits for a burst's answers before the session's next burst; every session gets
/// its first burst before any gets its second, as in a conversation-heavy service.
async fn run_caller<T: Target>(
    shared: Arc<Shared<T>>,
    plan: Plan,
    caller: usize,
    until: Option<Instant>,
) {
    if !plan.think.is_zero() {
        // Callers start spread evenly over one think time, as users do; started together they
        // would arrive in waves of every caller at once.
        let offset = plan.think.mul_f64(caller as f64 / plan.callers as f64);
        tokio::time::sleep(offset).await;
    }
    for first in (0..plan.turns).step_by(plan.burst) {
        let turns = first..(first + plan.burst).min(plan.turns);
        for session in (caller..plan.sessions).step_by(plan.callers) {
            if until.is_some_and(|until| Instant::now() >= until) {
                return;
            }
            run_burst(&shared, caller, session, turns.clone()).await;
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
    caller: usize,
    session: usize,
    turns: Range<usize>,
) {
    let key = &shared.keys[session];
    let target = shared.target.as_ref();
    let mut answers = Vec::with_capacity(turns.len());
    for turn in turns {
        let (signal, first_chunk) = shared.first_chunk_signal(session, turn);
        let sent = Instant::now();
        let pending = target.send(key, input_text(session, turn), signal).await;
        answers.push(async move {
            let result = shared.await_answer(key, pending, first_chunk, sent).await;
            shared.record(caller, session, turn, sent.elapsed(), result);
        });
    }
    join_all(answers).await;
}

/// The stripe a key's figures go to: spread by a hash of the key.
fn key_stripe(key: &SessionKey) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hash =
        BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key);
    (hash as usize) % HISTOGRAM_STRIPES
}

async fn sample<T: Target>(
    shared: Arc<Shared<T>>,
    progress: ProgressBar,
    stop: CancellationToken,
) -> Sample {
    let mut seen = Sample::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return seen,
        }
        seen.observe(shared.target.live_sessions(), rss_bytes());
        progress.set_position(shared.ledger.done());
        ticks += 1;
        // Merging the latency stripes costs a little: once a second is enough for a person.
        if ticks.is_multiple_of(10) && !progress.is_hidden() {
            progress.set_message(progress_note(&shared));
        }
    }
}

/// The progress line's note: p99 so far and failures by reason.
fn progress_note<T>(shared: &Shared<T>) -> String {
    let p99_ms = shared.latencies().value_at_quantile(0.99) as f64 / 1_000.0;
    let f = shared.ledger.failures();
    let mut note = format!("p99 {p99_ms:.1} ms");
    let reasons = [
        ("busy", f.busy),
        ("overloaded", f.overloaded),
        ("at capacity", f.at_capacity),
        ("concurrency", f.concurrency_limit),
        ("draining", f.draining),
        ("store", f.store),
        ("agent", f.agent),
        ("other", f.other),
    ];
    let failed: Vec<String> = reasons
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    if !failed.is_empty() {
        note.push_str(", errors: ");
        note.push_str(&failed.join(", "));
    }
    note
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
