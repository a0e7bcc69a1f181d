//! The `turnstile` binary: parses arguments and dispatches to the library.

mod cli;

use clap::Parser;

/// See the `mimalloc` feature in `Cargo.toml` for why the binary picks its allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    cli::init_tracing(args.log_format());
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.worker_threads() {
        builder.worker_threads(threads);
        // Before any thread starts: child processes (a load's baselines) run with as many.
        std::env::set_var("TOKIO_WORKER_THREADS", threads.to_string());
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            cli::say(
                cli::Said::Error,
                &format!("turnstile: cannot start the tokio runtime: {err}"),
            );
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli::run(args))
}
