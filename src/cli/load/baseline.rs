//! `--baseline mutex-gate|ractor`: the same workload through simpler designs, for comparison.
//!
//! Each baseline runs in a fresh process of this binary (`load --as-baseline NAME`, with the same
//! workload flags), one after the other, after turnstile's own run. A fresh process gives each
//! design the same starting point: no memory kept by the allocator from the run before (glibc
//! keeps hundreds of MB after a large run, which would hide a baseline's growth and slow it), no
//! leftover tasks, and a file store lock of its own. The child prints its report as JSON; its
//! figures land under `baseline`, or, if it could not run or report, its error does.

mod bare_ractor;
mod mutex_gate;
mod sim;
mod striped;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use turnstile::backend::{open_store, FileStore, StoreUrl};
use turnstile::config::DEFAULT_WINDOW;

use self::bare_ractor::BareRactor;
use self::mutex_gate::MutexGate;
use self::sim::AgentSim;
use super::options::{BaselineKind, ProgressMode};
use super::report::{BaselineFigures, Figures, Report};
use super::{keys, measure, report, LoadArgs};

/// Runs one baseline in this process (the child side of `--baseline`).
pub async fn run_here(args: &LoadArgs, kind: BaselineKind, run_id: &str) -> Result<Report, String> {
    let opened = open_store(&args.store).await.map_err(|e| e.to_string())?;
    let store = opened.store().clone();
    let sim = AgentSim {
        kind: args.agent,
        latency: args.latency,
        chunks: args.chunks,
        seed: args.seed,
    };
    let window = args.window.unwrap_or(DEFAULT_WINDOW);
    let keys = keys(args, kind.as_str(), run_id)?;
    let figures = match kind {
        BaselineKind::MutexGate => {
            let target = Arc::new(MutexGate::new(store.clone(), sim, window));
            measure(args, target, keys, store.as_ref(), kind.as_str()).await?
        }
        BaselineKind::Ractor => {
            let target = Arc::new(BareRactor::new(store.clone(), sim, window));
            measure(args, target, keys, store.as_ref(), kind.as_str()).await?
        }
    };
    Ok(report(args, run_id, opened.describe(), figures))
}

/// Runs every requested baseline in its own process and collects their figures. A baseline that
/// fails gets an entry with its error, and the others still run.
pub async fn run_children(
    args: &LoadArgs,
    turnstile: &Figures,
    run_id: &str,
) -> BTreeMap<String, BaselineFigures> {
    let mut kinds = args.baseline.clone();
    kinds.sort();
    kinds.dedup();
    let mut out = BTreeMap::new();
    for kind in kinds {
        let entry = match run_child(args, kind, run_id).await {
            Ok(figures) => BaselineFigures {
                turnstile_throughput_ratio: Some(
                    turnstile.turns_per_sec / figures.turns_per_sec.max(1e-9),
                ),
                figures: Some(figures),
                error: None,
            },
            Err(error) => {
                eprintln!("turnstile: {error}");
                BaselineFigures {
                    figures: None,
                    turnstile_throughput_ratio: None,
                    error: Some(error),
                }
            }
        };
        out.insert(kind.as_str().to_owned(), entry);
    }
    out
}

async fn run_child(args: &LoadArgs, kind: BaselineKind, run_id: &str) -> Result<Figures, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let (store, _temp) = child_store(&args.store, kind)?;
    let child_args = child_args(args, kind, run_id, &store);
    let output = tokio::task::spawn_blocking(move || {
        Command::new(exe)
            .args(child_args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
    })
    .await
    .map_err(|e| format!("the {} baseline could not run: {e}", kind.as_str()))?
    .map_err(|e| format!("cannot start the {} baseline: {e}", kind.as_str()))?;
    let report: Report = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "the {} baseline did not report ({}; exit status {})",
            kind.as_str(),
            e,
            output.status
        )
    })?;
    Ok(report.figures)
}

/// The same kind of store for the baseline: its own memory store, its own temporary folder
/// (made here, so that it goes even if the child is killed), a sibling `PATH-NAME` of a given
/// folder or of the data folder (the file store allows one process per root), or the same Redis
/// server (its keys are apart by their names).
fn child_store(
    store: &StoreUrl,
    kind: BaselineKind,
) -> Result<(StoreUrl, Option<tempfile::TempDir>), String> {
    let sibling = |path: &std::path::Path| {
        let mut sibling = path.as_os_str().to_owned();
        sibling.push(format!("-{}", kind.as_str()));
        StoreUrl::Folder(PathBuf::from(sibling))
    };
    Ok(match store {
        StoreUrl::TempFolder => {
            let dir = tempfile::Builder::new()
                .prefix(&format!("turnstile-load-{}-", kind.as_str()))
                .tempdir()
                .map_err(|e| format!("cannot create a temporary folder: {e}"))?;
            (StoreUrl::Folder(dir.path().to_path_buf()), Some(dir))
        }
        StoreUrl::Folder(path) => (sibling(path), None),
        StoreUrl::DataFolder => {
            let root = FileStore::default_root().map_err(|e| e.to_string())?;
            (sibling(&root), None)
        }
        other => (other.clone(), None),
    })
}

/// The workload flags, forwarded; turnstile-only settings (policy, capacity, idle TTL,
/// compaction) mean nothing to a baseline and are left out. So is `--ack-log`: it records
/// turnstile's acknowledgements only, and a baseline's lines (other keys, written by another
/// process) would only blur what a crash test reads from it.
fn child_args(args: &LoadArgs, kind: BaselineKind, run_id: &str, store: &StoreUrl) -> Vec<String> {
    let progress = match args.progress {
        ProgressMode::Auto if std::io::IsTerminal::is_terminal(&std::io::stdout()) => "always",
        ProgressMode::Always => "always",
        _ => "never",
    };
    let mut out: Vec<String> = vec![
        "load".into(),
        format!("--as-baseline={}", kind.as_str()),
        format!("--run-id={run_id}"),
        format!("--store={}", store.unredacted()),
        format!("--sessions={}", args.sessions),
        format!("--turns={}", args.turns),
        format!("--concurrency={}", args.concurrency),
        format!("--burst={}", args.burst),
        format!("--think={}", args.think),
        format!("--agent={}", args.agent.as_str()),
        format!("--latency={}", args.latency),
        format!("--chunks={}", args.chunks),
        format!("--seed={}", args.seed),
        format!("--interrupt-rate={}", args.interrupt_rate.0),
        format!("--progress={progress}"),
        "--json".into(),
    ];
    if let Some(window) = args.window {
        out.push(format!("--window={window}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    /// A baseline never shares turnstile's file store root (one process per root): it gets a
    /// sibling of a named folder, or a temporary folder of its own that this process removes.
    #[test]
    fn baselines_get_a_store_of_the_same_kind_apart_from_turnstiles() {
        let (store, temp) =
            child_store(&StoreUrl::Folder("/srv/data".into()), BaselineKind::Ractor).unwrap();
        assert_eq!(store, StoreUrl::Folder("/srv/data-ractor".into()));
        assert!(temp.is_none());
        let (store, temp) = child_store(&StoreUrl::TempFolder, BaselineKind::MutexGate).unwrap();
        let temp = temp.expect("a temporary folder owned by the parent");
        assert_eq!(store, StoreUrl::Folder(temp.path().to_path_buf()));
        let (store, _) = child_store(&StoreUrl::Memory, BaselineKind::Ractor).unwrap();
        assert_eq!(store, StoreUrl::Memory);
    }

    /// The ack log is turnstile's own: a baseline process must not append its lines to it.
    #[test]
    fn baselines_get_the_workload_but_not_the_ack_log() {
        let cli = Cli::parse_from(["load", "--ack-log=/tmp/acks", "--burst=3", "--sessions=7"]);
        let args = child_args(&cli.load, BaselineKind::Ractor, "r1", &StoreUrl::Memory);
        assert!(args.iter().all(|a| !a.contains("ack-log")), "{args:?}");
        for expected in [
            "--burst=3",
            "--sessions=7",
            "--as-baseline=ractor",
            "--store=memory",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
        }
    }
}
