//! `turnstile load`: a synthetic workload against an in-process runtime, then a verification
//! pass that reloads every session from the store and checks it against what was acknowledged.
//!
//! With `--target URL`, the same workload goes to running `turnstile serve` processes over HTTP
//! and each session is read back through their API (`remote.rs`, `http_target.rs`).
//!
//! With `--baseline`, the same workload runs again through simpler designs, each in a fresh
//! process of this binary (so that its memory and allocator state start clean), and their figures
//! are reported next to turnstile's. See `docs/load.md`.

mod ack_log;
mod baseline;
mod check;
mod cluster;
mod driver;
#[cfg(feature = "http")]
mod http_target;
mod ledger;
mod open_loop;
mod options;
mod quiet;
#[cfg(feature = "http")]
mod remote;
mod report;
mod rss;
mod target;
mod verify;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use turnstile::backend::{open_store, StoreUrl};
use turnstile::store::FaultyStore;
use turnstile::{
    config::{Ownership, DEFAULT_WINDOW},
    context::ExtractiveSummarizer,
    Agent, EchoAgent, MockLlmAgent, OverlapPolicy, Runtime, SessionKey, Store,
};

use self::ack_log::AckLog;
use self::driver::{drive, Interrupts, Plan, Shared};
pub use self::ledger::turn_of;
use self::open_loop::Step;
use self::options::{
    AgentKind, Api, BaselineKind, Fraction, Latency, ProgressMode, Spread, Targets,
};
use self::report::{Figures, Measured, Report};
use self::rss::rss_bytes;
use self::target::{Target, TurnstileTarget};
use self::verify::{verify, History};
use super::limits_arg::TurnLimitArgs;

/// Most runtimes `--cluster` starts in one process.
const MAX_CLUSTER: usize = 64;
/// Users the sessions are spread over: enough that per-user listings stay small.
const USERS: usize = 1_000;
/// Slack on top of the agent's latency that the p99 target allows (the "+ 2 ms").
const LATENCY_SLACK: Duration = Duration::from_millis(2);

/// Options of `turnstile load`. With none, it runs a meaningful load on the embedded file store
/// in a temporary folder.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Distinct sessions.
    #[arg(long, default_value_t = 1_000)]
    sessions: usize,
    /// Turns per session.
    #[arg(long, default_value_t = 10)]
    turns: usize,
    /// Closed-loop callers; each has one session's burst in flight at a time.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Turns of one session sent at once (each admitted before the next), so that the overlap
    /// policy decides what becomes of them. 1 sends a session's turns one at a time.
    #[arg(long, default_value_t = 1)]
    burst: usize,
    /// Milliseconds each caller pauses after a burst's answers, as a user reads and types.
    /// With many callers this keeps the offered load below what the machine can serve, so that
    /// latency measures the runtime rather than a queue for the CPU.
    #[arg(long, default_value_t = 0)]
    think: u64,
    /// The agent: `mock` (a mock LLM) or `echo`.
    #[arg(long, default_value = "mock")]
    agent: AgentKind,
    /// Agent latency in milliseconds: `20`, or `10..50` for a uniform spread.
    #[arg(long, default_value = "0")]
    latency: Latency,
    /// Chunks the mock agent streams per reply.
    #[arg(long, default_value_t = 4)]
    chunks: usize,
    #[command(flatten)]
    limits: TurnLimitArgs,
    /// `file:tmp` (the default: the file store in a fresh temporary folder, removed at exit; the
    /// report names it), `file` (the data folder, as for `serve` and `sessions`: $TURNSTILE_HOME,
    /// else $XDG_DATA_HOME/turnstile, else ~/.local/share/turnstile), `file:PATH`, `memory`,
    /// `redis://HOST:PORT`, `redis+cluster://HOST:PORT[,HOST:PORT…]` or `postgres://USER@HOST/DB`.
    #[arg(long, default_value = turnstile::backend::TEMP_FOLDER_URL)]
    store: StoreUrl,
    /// Overlap policy: queue, latest, reject or merge.
    #[arg(long, default_value = "queue")]
    policy: OverlapPolicy,
    /// Most live sessions (others are passivated, least recently used first).
    #[arg(long)]
    capacity: Option<usize>,
    /// Idle seconds before a session is passivated.
    #[arg(long)]
    idle_ttl: Option<f64>,
    /// Events the agent sees (the context window).
    #[arg(long)]
    window: Option<usize>,
    /// Compact with the built-in extractive summarizer once more than this many events are not
    /// covered by the summary.
    #[arg(long)]
    compact_after: Option<usize>,
    /// Fraction of turns (0 to 1) interrupted mid-way: when the turn streams its first chunk.
    /// Needs the mock agent with a latency and at least 2 chunks.
    #[arg(long, default_value = "0")]
    interrupt_rate: Fraction,
    /// Seed for the latency spread and the choice of interrupted turns.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Append `KEY SEQ` to this file for every turn turnstile acknowledged, as it is acknowledged
    /// (baselines are not logged).
    #[arg(long, value_name = "FILE")]
    ack_log: Option<PathBuf>,
    /// Also run the workload through a simpler design: `mutex-gate`, `ractor` (repeatable, or
    /// a comma-separated list).
    #[arg(long, value_delimiter = ',')]
    baseline: Vec<BaselineKind>,
    /// Progress bar: `auto` (only when stdout is a terminal), `always` or `never`.
    #[arg(long, default_value = "auto")]
    progress: ProgressMode,
    /// Share of turns (0 to 1) that may fail without failing the command. A failure is any
    /// error except `busy` under `--policy reject`, which is that policy's promised answer.
    #[arg(long, default_value = "0", value_name = "FRACTION")]
    allow_failures: Fraction,
    /// Run N runtimes in this process that share the store's sessions one owner at a time,
    /// as N `turnstile serve --cluster` processes would: each with its own connection and lease
    /// identity, each turn sent to one at random and on to the session's owner when it is
    /// another (counted as `forwarded`). Needs a store that keeps leases (redis, memory) and
    /// `--burst 1` without interrupts.
    #[arg(long, value_name = "N")]
    cluster: Option<usize>,
    /// Send turns open-loop at this many per second, whatever the service's speed, and measure
    /// each turn's latency from when it was due (no coordinated omission). Sends every turn once,
    /// then stops.
    #[arg(long, value_name = "TURNS_PER_SEC", value_parser = open_loop::parse_rate, conflicts_with = "rate_curve")]
    rate: Option<f64>,
    /// Open-loop steps, e.g. `100:30s,500:30s,1000:30s` (turns per second : seconds); the report
    /// gives each step's achieved rate and percentiles. Stops early when every turn was sent.
    #[arg(long, value_name = "STEPS")]
    rate_curve: Option<open_loop::RateCurve>,
    /// With `--rate-curve`: report the highest step rate whose p99 stays within this many ms.
    #[arg(long, value_name = "MS", requires = "rate_curve")]
    slo_ms: Option<u64>,
    /// Send turns as streams and report the time to each turn's first chunk (`ttfc_us`).
    #[arg(long)]
    stream: bool,
    /// Send no turn after this many seconds (turns already sent are answered and verified;
    /// turns never sent are not counted).
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Load running `turnstile serve` processes over HTTP instead of a runtime in this process:
    /// `http://HOST:PORT`, comma-separated for several. The same workload and verification
    /// (each session read back through the API; needs an admin token). `--agent`, `--latency`
    /// and `--chunks` then describe the service (for the report and its latency budget).
    #[arg(
        long,
        value_name = "URL[,URL…]",
        conflicts_with_all = [
            "store", "cluster", "baseline", "capacity", "idle_ttl", "window", "compact_after",
            "max_reply_bytes", "turn_timeout",
            "fault_drop_one_append", "fault_fail_every", "as_baseline",
        ]
    )]
    target: Option<Targets>,
    /// With `--target`: the bearer token sent to the servers (an admin token of theirs: the run
    /// writes and reads back sessions of 1,000 users).
    #[arg(long, env = "TURNSTILE_LOAD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// With several `--target` URLs: `random` (each turn to any of them; they must share the
    /// sessions, as `serve --cluster` processes do) or `hash` (each session always to one, by a
    /// stable hash of its key; for independent processes).
    #[arg(long, default_value = "random", requires = "target")]
    spread: Spread,
    /// With `--target`: the routes turns go through: `turnstile` (`POST …/turns`) or `openai`
    /// (`POST /v1/responses`, streamed, in one conversation per session, made before the clock
    /// starts; interrupts through `POST …/interrupt`). `openai` takes `--policy queue` only.
    #[arg(long, default_value = "turnstile", requires = "target")]
    api: Api,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Internal: run only this baseline (the child process of `--baseline`).
    #[arg(long, hide = true)]
    as_baseline: Option<BaselineKind>,
    /// Internal: the run id, shared by a run and its baseline processes.
    #[arg(long, hide = true)]
    run_id: Option<String>,
    /// Testing only: the store acknowledges the first append without writing it, so the
    /// verification pass must report one lost turn.
    #[arg(long, hide = true)]
    fault_drop_one_append: bool,
    /// Testing only (soak runs): every N-th append fails with a store error, writing nothing.
    #[arg(long, hide = true, value_name = "N")]
    fault_fail_every: Option<usize>,
}

/// Runs `turnstile load`. Exits non-zero when the verification found a turn lost, duplicated,
/// reordered, misanswered or stored after `Busy`, when more turns failed than
/// `--allow-failures` allows, or when a baseline could not run.
pub async fn run(args: LoadArgs) -> Result<ExitCode, String> {
    check::check(&args)?;
    let run_id = args.run_id.clone().unwrap_or_else(|| {
        let id = uuid::Uuid::new_v4().simple().to_string();
        id[..8].to_owned()
    });
    let report = match args.as_baseline {
        Some(kind) => baseline::run_here(&args, kind, &run_id).await?,
        None if args.cluster.is_some() => cluster::run(&args, &run_id).await?,
        #[cfg(feature = "http")]
        None if args.target.is_some() => remote::run(&args, &run_id).await?,
        #[cfg(not(feature = "http"))]
        None if args.target.is_some() => {
            return Err("--target needs a build with the `http` feature".into());
        }
        None => {
            let mut report = run_turnstile(&args, &run_id).await?;
            // A baseline that fails is recorded in its entry: turnstile's report still prints.
            report.baseline = baseline::run_children(&args, &report.figures, &run_id).await;
            report
        }
    };
    report.print(args.json);
    // A baseline's process reports its failures to the parent, which judges only turnstile's.
    let failed = match args.as_baseline {
        Some(_) => 0.0,
        None => report.figures.failed_share(),
    };
    let allowed = args.allow_failures.0;
    if failed > allowed {
        eprintln!(
            "turnstile load: {:.2}% of turns failed (allowed: {:.2}%, --allow-failures)",
            failed * 100.0,
            allowed * 100.0
        );
    }
    Ok(
        if report.is_clean() && failed <= allowed && report.baselines_ran() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

/// The workload every design gets.
fn plan(args: &LoadArgs) -> Plan {
    Plan {
        sessions: args.sessions,
        turns: args.turns,
        callers: args.concurrency.min(args.sessions),
        burst: args.burst.min(args.turns),
        think: Duration::from_millis(args.think),
        interrupts: (args.interrupt_rate.0 > 0.0).then_some(Interrupts {
            rate: args.interrupt_rate.0,
            seed: args.seed,
        }),
        ttfc: args.stream,
        duration: args.duration,
    }
}

/// `--duration`: positive seconds, at most a day.
fn parse_duration(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("bad duration {text:?}; expected seconds, above 0, at most 86400"))
}

/// The open-loop schedule, if `--rate` or `--rate-curve` asked for one.
fn schedule(args: &LoadArgs) -> Option<Vec<Step>> {
    match (args.rate, &args.rate_curve) {
        (Some(rate), _) => Some(vec![Step {
            rate,
            duration: None,
        }]),
        (None, Some(curve)) => Some(curve.0.clone()),
        (None, None) => None,
    }
}

/// Session keys for one design: `user{i % 1000}/{design}-{run}-{i}`, so that designs and runs
/// sharing a store never touch each other's sessions.
fn keys(args: &LoadArgs, design: &str, run_id: &str) -> Result<Arc<[SessionKey]>, String> {
    (0..args.sessions)
        .map(|i| {
            SessionKey::new(
                format!("user{}", i % USERS),
                format!("{design}-{run_id}-{i}"),
            )
        })
        .collect::<Result<Arc<[SessionKey]>, _>>()
        .map_err(|e| e.to_string())
}

async fn run_turnstile(args: &LoadArgs, run_id: &str) -> Result<Report, String> {
    let opened = open_store(&args.store).await.map_err(|e| e.to_string())?;
    let store = if args.fault_drop_one_append || args.fault_fail_every.is_some() {
        let faulty = FaultyStore::new(opened.store().clone());
        if args.fault_drop_one_append {
            faulty.drop_next_appends(1);
        }
        faulty.fail_every_nth_append(args.fault_fail_every.unwrap_or(0));
        faulty
    } else {
        opened.store().clone()
    };
    let keys = keys(args, "load", run_id)?;
    let runtime = build_runtime(args, store.clone(), None)?;
    let target = Arc::new(TurnstileTarget {
        runtime,
        // Open-loop arrivals wait for the previous turn of their session to be admitted, which
        // only the streaming path reports.
        ordered: args.burst > 1 || schedule(args).is_some(),
    });
    let figures = measure(args, target, keys, store.as_ref(), "turnstile").await?;
    Ok(report(args, run_id, opened.describe(), figures))
}

/// Drives one design through the workload, finishes it, verifies the store and computes its
/// figures.
async fn measure<T: Target, H: History + ?Sized>(
    args: &LoadArgs,
    target: Arc<T>,
    keys: Arc<[SessionKey]>,
    history: &H,
    label: &str,
) -> Result<Figures, String> {
    let plan = plan(args);
    let ack_log = match &args.ack_log {
        Some(path) => Some(Arc::new(AckLog::open(path)?)),
        None => None,
    };
    let shared = Arc::new(Shared::new(target, keys, &plan, ack_log)?);
    if !args.baseline.is_empty() || args.as_baseline.is_some() {
        // Designs compared run one after another: each starts on a machine as quiet as the
        // others had (see `quiet`).
        quiet::settle(label).await;
    }
    let progress = progress_bar(args.progress, (plan.sessions * plan.turns) as u64, label);
    let rss_before = rss_bytes();
    let steps = schedule(args);
    let (elapsed, cpu, sample, open) =
        drive(shared.clone(), plan, progress, steps.as_deref()).await?;
    let counters = shared.target.counters();
    shared.target.finish().await;
    let verdict = verify(history, &shared.keys, &shared.ledger).await?;
    Ok(Figures::new(Measured {
        ledger: &shared.ledger,
        latencies: &shared.latencies(),
        elapsed,
        cpu,
        counters,
        verdict,
        sample,
        rss_before,
        latency_budget: args.latency.max + LATENCY_SLACK,
        ttfc: shared.ttfc(),
        open,
        slo: args.slo_ms.map(Duration::from_millis),
    }))
}

fn report(args: &LoadArgs, run_id: &str, store: String, figures: Figures) -> Report {
    Report {
        run_id: run_id.to_owned(),
        store,
        agent: args.agent.as_str().to_owned(),
        latency_ms: args.latency.to_string(),
        chunks: args.chunks,
        policy: format!("{:?}", args.policy).to_lowercase(),
        sessions: args.sessions,
        turns_per_session: args.turns,
        concurrency: args.concurrency,
        burst: args.burst,
        think_ms: args.think,
        interrupt_rate: args.interrupt_rate.0,
        worker_threads: tokio::runtime::Handle::current().metrics().num_workers(),
        figures,
        baseline: BTreeMap::new(),
        cluster: None,
        target: None,
    }
}

fn build_runtime(
    args: &LoadArgs,
    store: Arc<dyn Store>,
    ownership: Option<Ownership>,
) -> Result<Runtime, String> {
    let agent: Arc<dyn Agent> = match args.agent {
        AgentKind::Echo => Arc::new(EchoAgent),
        AgentKind::Mock => Arc::new(
            MockLlmAgent::new()
                .with_latency_range(args.latency.min, args.latency.max)
                .with_chunks(args.chunks)
                .with_seed(args.seed),
        ),
    };
    let mut builder = args
        .limits
        .apply(Runtime::builder())
        .agent_arc(agent)
        .store_arc(store)
        .with_policy(args.policy)
        .with_capacity_wait(Duration::from_secs(30))
        .with_window(args.window.unwrap_or(DEFAULT_WINDOW));
    if let Some(after) = args.compact_after {
        builder = builder.with_summarizer(ExtractiveSummarizer::default(), after);
    }
    if let Some(ownership) = ownership {
        builder = builder.with_ownership(ownership);
    }
    if let Some(capacity) = args.capacity {
        builder = builder.with_capacity(capacity);
    }
    if let Some(ttl) = args.idle_ttl {
        let ttl = Duration::try_from_secs_f64(ttl).map_err(|e| format!("--idle-ttl: {e}"))?;
        builder = builder.with_idle_ttl(ttl);
    }
    builder.build().map_err(|e| e.to_string())
}

/// A progress bar on stderr, or a hidden one: by default only when stdout is a terminal, so
/// that piped and `--json` runs print nothing but their report.
fn progress_bar(mode: ProgressMode, total: u64, label: &str) -> ProgressBar {
    let show = match mode {
        ProgressMode::Auto => std::io::stdout().is_terminal(),
        ProgressMode::Always => true,
        ProgressMode::Never => false,
    };
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>10} [{bar:40}] {human_pos}/{human_len} turns  {per_sec}  eta {eta}  {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_owned());
    bar
}
