//! Command-line surface. Uses only the library's public API, like any embedding application.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent_arg;
#[cfg(feature = "http")]
mod answer_body;
mod chat;
mod limits_arg;
mod load;
mod logs;
mod mcp_arg;
#[cfg(feature = "http")]
mod serve;
mod sessions;
mod sse;
mod visible;

/// One actor per live conversation session, for chat and LLM-agent backends.
#[derive(Debug, Parser)]
#[command(name = "turnstile", version, about)]
pub struct Cli {
    /// Threads that run turnstile's tasks (default: one per core, or `TOKIO_WORKER_THREADS`).
    /// On a machine that shares its cores with the store's server (a Redis on the same host),
    /// fewer threads than cores leave that server a core of its own: on 2 cores beside a local
    /// Redis, `--worker-threads 1` carries more turns than 2 (docs/BENCHMARKS.md). 1 ..= 1024.
    #[arg(
        long,
        global = true,
        value_name = "N",
        value_parser = clap::value_parser!(u16).range(1..=1024)
    )]
    worker_threads: Option<u16>,
    /// How log records are written to stderr: `plain` (one line each; coloured only on a
    /// terminal) or `json` (one JSON object per line). `RUST_LOG` filters them.
    #[arg(long, global = true, value_name = "FORMAT", default_value = "plain")]
    log_format: logs::LogFormat,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// The number of worker threads asked for with `--worker-threads`, if any.
    pub fn worker_threads(&self) -> Option<usize> {
        self.worker_threads.map(usize::from)
    }

    /// How logs are written (`--log-format`).
    pub fn log_format(&self) -> logs::LogFormat {
        self.log_format
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive the runtime with a synthetic workload and report throughput, latency and integrity.
    Load(load::LoadArgs),
    /// List, show, delete, collect, export and import the sessions of a store.
    Sessions(sessions::SessionsArgs),
    /// Chat with one session in the terminal, through the runtime and the store: replies stream,
    /// Ctrl-C interrupts a reply, Ctrl-D or /quit leaves.
    Chat(chat::ChatArgs),
    /// Serve the runtime over HTTP: turns (JSON or server-sent events), channels, pairings,
    /// bearer-token auth, /metrics; SIGTERM or Ctrl-C drains and exits.
    #[cfg(feature = "http")]
    Serve(Box<serve::ServeArgs>),
}

pub use logs::{init_tracing, say, Said};

/// Runs the chosen command.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Load(args) => load::run(args).await,
        Command::Sessions(args) => sessions::run(args).await,
        Command::Chat(args) => chat::run(args).await,
        #[cfg(feature = "http")]
        Command::Serve(args) => serve::run(*args).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            logs::say(logs::Said::Error, &format!("turnstile: {err}"));
            ExitCode::FAILURE
        }
    }
}
