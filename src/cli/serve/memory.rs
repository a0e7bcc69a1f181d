//! `serve`'s memory options: which memory store, when sessions are ingested, automatic recall.

use clap::Args;
use turnstile::backend::open_memory;
use turnstile::memory::MemorySpec;
use turnstile::{Ingest, MemoryOptions, RuntimeBuilder};

/// Memory across sessions.
#[derive(Debug, Args)]
pub(super) struct MemoryArgs {
    /// Memory across sessions: `off`, `memory` (lost on exit), `file:DIR` (one log per user in
    /// DIR) or `redis://HOST:PORT`. See docs/memory.md.
    #[arg(long, default_value = "off")]
    memory: MemorySpec,
    /// When sessions are ingested into memory: `passivation` (when a session stops),
    /// `compaction` (the events a compaction summarises) or `explicit` (never by itself).
    #[arg(long, default_value = "passivation")]
    memory_ingest: Ingest,
    /// Recall this many entries with each turn's input into the `<memory-context>` block
    /// (1..=100). Without it, agents recall only when they ask.
    #[arg(long)]
    auto_recall: Option<usize>,
}

/// Gives `builder` the memory store the options name, if any.
pub(super) async fn with_memory(
    builder: RuntimeBuilder,
    args: &MemoryArgs,
) -> Result<RuntimeBuilder, String> {
    if args.memory == MemorySpec::Off {
        if args.auto_recall.is_some() {
            return Err("--auto-recall needs a memory store: give --memory too".into());
        }
        return Ok(builder);
    }
    let store = open_memory(&args.memory)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no memory store")?;
    let options = MemoryOptions {
        ingest: args.memory_ingest,
        auto_recall: args.auto_recall,
    };
    Ok(builder.with_memory_arc(store, options))
}
