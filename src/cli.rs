//! Command-line surface. Uses only the library's public API, like any embedding application.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent_arg;
mod artifacts_arg;
mod chat;
mod load;
#[cfg(feature = "http")]
mod serve;
mod sessions;

/// One actor per live conversation session, for chat and LLM-agent backends.
#[derive(Debug, Parser)]
#[command(name = "turnstile", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
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
    Serve(serve::ServeArgs),
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings, and ractor's own spans muted).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,ractor=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs the chosen command.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Load(args) => load::run(args).await,
        Command::Sessions(args) => sessions::run(args).await,
        Command::Chat(args) => chat::run(args).await,
        #[cfg(feature = "http")]
        Command::Serve(args) => serve::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("turnstile: {err}");
            ExitCode::FAILURE
        }
    }
}
