//! `turnstile serve`: the HTTP gateway. Parses options, opens the stores, builds the runtime and
//! hands everything to [`turnstile::http::Gateway::serve_lingering`]; SIGTERM or Ctrl-C drains and exits.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use turnstile::backend::{open_store, StoreUrl};
use turnstile::config::Ownership;
use turnstile::{
    channel::open_inbox, channel::open_pairings, channel::Adapters, channel::ChannelRouter,
    channel::ChannelsConfig, context::ExtractiveSummarizer, http::Gateway, http::HttpConfig,
    http::Lingering, http::ServeError, http::Tokens, OverlapPolicy, Runtime, Store,
};

use super::agent_arg::{build_agent, AgentChoice, ModelArgs};
use super::limits_arg::TurnLimitArgs;
use super::logs::{say, Said};
use super::mcp_arg::{self, Mcp, McpArgs};
use cluster::{cluster_ownership, shared_store};

mod artifacts;
mod cluster;
mod memory;

/// Buckets of every `*_seconds` histogram: from a cached turn (1 ms) to a long LLM reply (60 s).
const SECONDS_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 60.0,
];

/// How often recorded histogram samples are folded in when nobody scrapes `/metrics`, so that
/// they cannot pile up in memory.
const METRICS_UPKEEP: Duration = Duration::from_secs(5);

/// How long a message waits for a session slot at `--capacity` by default: a passivation
/// (the least recently used idle session flushed and stopped) takes milliseconds, a burst of
/// new sessions a while; past this the caller hears 429 and can retry elsewhere.
const DEFAULT_CAPACITY_WAIT: Duration = Duration::from_secs(5);

/// Options of `turnstile serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Without tokens only a loopback address is accepted.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// `file` (the data folder: $TURNSTILE_HOME, else $XDG_DATA_HOME/turnstile, else
    /// ~/.local/share/turnstile), `file:PATH`, `memory`, `redis://HOST:PORT`,
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]` (a Redis Cluster), `postgres://USER@HOST/DB` or
    /// `file:tmp` (a temporary folder, removed at exit). Pairings
    /// are kept in the same place (in memory beside a PostgreSQL store).
    #[arg(long, default_value = "file")]
    store: StoreUrl,
    /// The agent: `mock` (a mock LLM), `echo`, or `openai` (a model; see the model options).
    #[arg(long, default_value = "mock")]
    agent: AgentChoice,
    /// Mock agent latency per turn, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency: u64,
    /// Chunks the mock agent streams per reply.
    #[arg(long, default_value_t = 4)]
    chunks: usize,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    mcp: McpArgs,
    #[command(flatten)]
    limits: TurnLimitArgs,
    /// Bearer tokens file: `<token> admin` or `<token> user:<id> [channels:<a>,<b>]` per line.
    #[arg(long, env = "TURNSTILE_TOKENS")]
    tokens: Option<PathBuf>,
    /// Overlap policy of session turns: queue, latest, reject or merge.
    #[arg(long, default_value = "queue")]
    policy: OverlapPolicy,
    /// Overlap policy of channel messages (a newer message in a chat wins by default).
    #[arg(long, default_value = "latest")]
    channel_policy: OverlapPolicy,
    /// The bots to run on Telegram, Slack and Discord: a TOML file with a `[telegram]`,
    /// `[slack]` and/or `[discord]` section, secrets named by environment variables
    /// (docs/channels.md). Needs a file or memory store.
    #[arg(long)]
    channels: Option<PathBuf>,
    /// Seconds a request waits for its answer (the turn goes on after it unless the request
    /// set `cancel_on_timeout`).
    #[arg(long, default_value_t = 60.0)]
    request_timeout: f64,
    /// Seconds running turns get to finish after SIGTERM before they are interrupted.
    #[arg(long, default_value_t = 25.0)]
    drain_timeout: f64,
    /// Seconds a connection may wait for a request (new, or kept alive after its last answer)
    /// before it is closed. Keep it above your load balancer's idle timeout.
    #[arg(long, default_value_t = turnstile::http::DEFAULT_IDLE_TIMEOUT.as_secs_f64())]
    idle_timeout: f64,
    /// Seconds a request's header block may take from its first byte.
    #[arg(long, default_value_t = turnstile::http::DEFAULT_HEADER_TIMEOUT.as_secs_f64())]
    header_timeout: f64,
    /// Open connections at most; at the cap new ones wait until one closes. Default: the
    /// process's descriptor limit less an eighth kept for the store.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = turnstile::http::DEFAULT_BODY_LIMIT)]
    body_limit: usize,
    /// Most live sessions (others are passivated, least recently used first).
    #[arg(long)]
    capacity: Option<usize>,
    /// Seconds a message for a session that is not live waits for a slot when `--capacity` is
    /// reached (an idle session is being passivated to make room) before 429 `at_capacity`;
    /// 0 refuses at once.
    #[arg(long, default_value_t = DEFAULT_CAPACITY_WAIT.as_secs_f64())]
    capacity_wait: f64,
    /// Events the agent sees (the context window).
    #[arg(long)]
    window: Option<usize>,
    /// Compact with the built-in extractive summarizer once more than this many events are not
    /// covered by the summary.
    #[arg(long)]
    compact_after: Option<usize>,
    /// Share the store's sessions with other `serve --cluster` processes: one owner per session
    /// (a lease in the store), and requests for a session another process owns forwarded there.
    /// Needs a store that keeps leases (redis://…, redis+cluster://…, postgres://…).
    #[arg(long)]
    cluster: bool,
    /// The URL other processes reach this one at, `http://HOST:PORT`. Defaults to `http://` and
    /// the listen address, unless that is 0.0.0.0 or [::] (then it must be given).
    #[arg(long, requires = "cluster")]
    advertise: Option<String>,
    /// Seconds a session's lease lasts without renewal: a dead process's sessions are served
    /// again elsewhere within about this long.
    #[arg(long, requires = "cluster", default_value_t = turnstile::config::DEFAULT_LEASE_TTL.as_secs_f64())]
    lease_ttl: f64,
    /// With --cluster, answer 421 `owned_elsewhere` for a session another process owns instead
    /// of forwarding the request there (for a load balancer that routes by itself).
    #[arg(long, requires = "cluster")]
    no_forward: bool,
    /// Where artifacts live: `auto` (beside the store: memory → memory, a file store → its
    /// folder's `artifacts/`, Redis → the same Redis), `off`, `memory`, `file:DIR` or
    /// `redis://HOST:PORT`.
    #[arg(long, default_value = "auto")]
    artifacts: String,
    /// Largest artifact version accepted, in bytes (uploads past it are answered 413).
    #[arg(long, default_value_t = turnstile::artifact::DEFAULT_MAX_BYTES)]
    artifact_max_bytes: u64,
    /// A registry of declared state keys, TOML (`.toml`) or JSON: their types, defaults and
    /// descriptions; see docs/runtime-semantics.md.
    #[arg(long)]
    state_keys: Option<PathBuf>,
    /// What a turn that writes an undeclared or mistyped state key gets: off, warn or strict
    /// (the turn fails: its input and the failure are stored, none of its output or state
    /// writes). Default: the registry file's `mode`.
    #[arg(long)]
    state_keys_mode: Option<turnstile::state_keys::Mode>,
    #[command(flatten)]
    memory: memory::MemoryArgs,
    /// Bytes of the requests sent to the model kept in memory for operators to read
    /// (`GET …/turns/{seq}/model-requests`, the inspector's "Requests sent to the model"), the newest turns'
    /// first; 0 keeps none.
    #[arg(long, value_name = "BYTES", default_value_t = turnstile::agent::DEFAULT_SENT_REQUEST_BYTES)]
    keep_model_requests: usize,
}

/// Runs the server until SIGTERM or Ctrl-C, then drains.
pub async fn run(args: ServeArgs) -> Result<ExitCode, String> {
    let tokens = match &args.tokens {
        Some(path) => {
            let tokens = Tokens::load(path).map_err(|e| e.to_string())?;
            if tokens.is_empty() {
                // An operator who names a tokens file means to require tokens: serving without
                // any because the file is empty (or all comments) would open the API silently.
                return Err(format!(
                    "the tokens file {} lists no token; add `<token> admin` or \
                     `<token> user:<id>` lines, or leave out --tokens",
                    path.display()
                ));
            }
            tokens
        }
        None => Tokens::none(),
    };
    if tokens.is_empty() && !args.addr.ip().is_loopback() {
        // Said before binding, so that an open API is never reachable even for an instant.
        return Err(ServeError::OpenOnNonLoopback { addr: args.addr }.to_string());
    }
    let ownership = cluster_ownership(&args)?;
    let shutdown = shutdown_signal()?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let opened = open_store(&args.store).await.map_err(|e| e.to_string())?;
    if args.cluster {
        shared_store(&args.store, opened.store().as_ref())?;
    }
    // Port 0 is known only once bound.
    let ownership = ownership.map(|o| o.advertising(local));
    let extras = Extras {
        artifacts: artifacts::open_artifacts(&args, &opened).await?,
        state_keys: artifacts::load_state_keys(&args)?,
    };
    let prepared = Prepared {
        tokens,
        listener,
        local,
        opened,
        ownership,
        extras,
    };
    // The MCP servers run for as long as the gateway: stopped (and reaped) after the drain,
    // whatever ended it.
    let mcp = mcp_arg::connect(&args.mcp, args.agent == AgentChoice::OpenAi).await?;
    let served = serve_with_tools(&args, &mcp, prepared, shutdown).await;
    mcp.shutdown().await;
    let (code, lingering) = served?;
    // Until here new connections were still answered `503 draining`; refused from now on.
    lingering.close().await;
    Ok(code)
}

/// What `serve` set up before the runtime: its listener, store, tokens and extras.
struct Prepared {
    tokens: Tokens,
    listener: tokio::net::TcpListener,
    local: SocketAddr,
    opened: turnstile::backend::OpenedStore,
    ownership: Option<Ownership>,
    extras: Extras,
}

/// Builds the runtime (with `mcp`'s tools for the model) and serves until `shutdown`, then
/// drains and closes the store; the listener, still answering `503 draining`, is handed back
/// for the rest of the exit.
async fn serve_with_tools(
    args: &ServeArgs,
    mcp: &Mcp,
    prepared: Prepared,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(ExitCode, Lingering), String> {
    let Prepared {
        tokens,
        listener,
        local,
        opened,
        ownership,
        extras,
    } = prepared;
    let pairings = open_pairings(&opened).await.map_err(|e| e.to_string())?;
    let runtime = build_runtime(args, opened.store().clone(), ownership, extras, mcp).await?;
    let router =
        ChannelRouter::with_pairings_arc(runtime, pairings).with_policy(args.channel_policy);
    let config = HttpConfig {
        body_limit: args.body_limit,
        request_timeout: seconds(args.request_timeout, "--request-timeout")?,
        drain_deadline: seconds(args.drain_timeout, "--drain-timeout")?,
        forward: args.cluster && !args.no_forward,
        idle_timeout: seconds(args.idle_timeout, "--idle-timeout")?,
        header_timeout: seconds(args.header_timeout, "--header-timeout")?,
        max_connections: match args.max_connections {
            Some(0) => return Err("--max-connections must be at least 1".into()),
            Some(n) => n,
            None => turnstile::http::default_max_connections(),
        },
        ..HttpConfig::default()
    };
    let adapters = match &args.channels {
        Some(path) => Some(channel_adapters(path, &opened, &router).await?),
        None => None,
    };
    let mut gateway = Gateway::new(router)
        .with_tokens(tokens)
        .with_config(config)
        .with_models(vec![super::agent_arg::model_name(args.agent, &args.model)])
        .with_metrics(install_metrics()?);
    if let Some(adapters) = &adapters {
        gateway = gateway.with_adapters(adapters.clone());
        let resumed = adapters.start().await.map_err(|e| e.to_string())?;
        println!(
            "turnstile serve: channels {} at http://{local}/channels/ ({resumed} unanswered \
             messages resumed)",
            adapters.channels().join(", ")
        );
    }
    println!("turnstile serve: listening on http://{local}");
    if let Some(address) = gateway.runtime().address() {
        println!("turnstile serve: cluster member at {address}");
    }
    let (report, lingering) = gateway
        .serve_lingering(listener, shutdown)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(adapters) = adapters {
        // Replies of turns that finished in the drain are written; the rest wait in the inbox
        // for the next start.
        adapters.stop(CHANNEL_GRACE).await;
    }
    // The store closes (the file store writes what its journal holds behind into the session
    // files) on a blocking thread, while the lingering listener answers.
    let closing = tokio::task::spawn_blocking(move || drop(opened));
    if closing.await.is_err() {
        say(Said::Error, "turnstile serve: closing the store panicked");
    }
    if report.left > 0 {
        say(
            Said::Error,
            &format!(
                "turnstile serve: {} sessions could not be flushed before exit",
                report.left
            ),
        );
        return Ok((ExitCode::FAILURE, lingering));
    }
    if !report.clean {
        say(
            Said::Warn,
            "turnstile serve: the drain did not finish cleanly: turns were interrupted at its \
             deadline, or background work was still running after its grace",
        );
    }
    say(Said::Info, "turnstile serve: drained, exiting");
    Ok((ExitCode::SUCCESS, lingering))
}

/// How long replies still being written at exit get before they are left to the next start.
const CHANNEL_GRACE: Duration = Duration::from_secs(5);

/// The channel adapters of `--channels FILE`, with their inbox beside the store.
async fn channel_adapters(
    path: &std::path::Path,
    opened: &turnstile::backend::OpenedStore,
    router: &ChannelRouter,
) -> Result<Adapters, String> {
    let config = ChannelsConfig::load(path).map_err(|e| e.to_string())?;
    let inbox = open_inbox(opened)
        .await
        .map_err(|e| format!("--channels: {e}"))?;
    Adapters::build(&config, router, inbox).map_err(|e| format!("--channels: {e}"))
}

fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    match Duration::try_from_secs_f64(value) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!("{flag} must be a positive number of seconds")),
    }
}

/// What the runtime gets besides its store: artifacts and declared state keys.
struct Extras {
    artifacts: Option<Arc<dyn turnstile::ArtifactStore>>,
    state_keys: Option<turnstile::state_keys::StateKeys>,
}

async fn build_runtime(
    args: &ServeArgs,
    store: Arc<dyn Store>,
    ownership: Option<Ownership>,
    extras: Extras,
    mcp: &Mcp,
) -> Result<Runtime, String> {
    let agent = build_agent(args.agent, args.latency, args.chunks, &args.model, mcp)?;
    let mut builder = args.limits.apply(
        Runtime::builder()
            .agent_arc(agent)
            .store_arc(store)
            .with_policy(args.policy)
            .keep_sent_requests(args.keep_model_requests),
    );
    if let Some(capacity) = args.capacity {
        builder = builder.with_capacity(capacity);
    }
    match Duration::try_from_secs_f64(args.capacity_wait) {
        Ok(wait) => builder = builder.with_capacity_wait(wait),
        Err(_) => return Err("--capacity-wait must be a number of seconds, 0 or more".into()),
    }
    if let Some(window) = args.window {
        builder = builder.with_window(window);
    }
    if let Some(after) = args.compact_after {
        builder = builder.with_summarizer(ExtractiveSummarizer::default(), after);
    }
    if let Some(ownership) = ownership {
        builder = builder.with_ownership(ownership);
    }
    if let Some(store) = extras.artifacts {
        builder = builder.with_artifacts(store);
    }
    if let Some(keys) = extras.state_keys {
        builder = builder.state_keys(keys);
    }
    let builder = memory::with_memory(builder, &args.memory).await?;
    builder.build().map_err(|e| e.to_string())
}

/// Installs the process-wide Prometheus recorder and keeps its histograms folded.
fn install_metrics() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(METRICS_UPKEEP);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Completes on SIGTERM (what orchestrators send) or Ctrl-C. The handlers are installed here,
/// before the server announces itself, so that an early signal drains instead of killing.
#[cfg(unix)]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind: SignalKind| {
        signal(kind).map_err(|e| format!("cannot listen for signal {}: {e}", kind.as_raw_value()))
    };
    let mut terminate = listen(SignalKind::terminate())?;
    let mut interrupt = listen(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Completes on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static, String> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}
