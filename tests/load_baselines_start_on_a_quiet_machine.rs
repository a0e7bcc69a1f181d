//! Property: with `--baseline`, each design's run (turnstile's and each baseline's, in its own
//! process) first waits for a quiet machine, for at most a bound left out of its figures, and
//! says on stderr when the machine stayed busy, whatever `RUST_LOG` says; without `--baseline`
//! nothing waits. A process started alongside the command then competes with no design more
//! than another (`docs/load.md`, "Baselines").

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use support::cli::turnstile_json;

/// What the load writes when no window was quiet.
const STAYED_BUSY: &str = "the machine stayed busy";

/// One spinning thread per core, for as long as it is held: no window is quiet meanwhile.
struct Burners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Burners {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n = std::hint::black_box(n.wrapping_add(1));
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Runs a small load on the memory store with `extra` flags; returns its report and stderr.
fn load(extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec![
        "load",
        "--store=memory",
        "--sessions=10",
        "--turns=2",
        "--agent=echo",
        "--json",
        "--progress=never",
    ];
    args.extend_from_slice(extra);
    let (run, report) = turnstile_json(&args);
    assert!(run.success, "load failed:\n{}\n{}", run.stdout, run.stderr);
    (report, run.stderr)
}

#[test]
fn on_a_busy_machine_each_design_waits_its_bound_then_runs_and_says_so() {
    let burners = Burners::start();
    let (report, stderr) = load(&["--baseline=ractor"]);
    drop(burners);
    assert_eq!(
        stderr.matches(STAYED_BUSY).count(),
        2,
        "one warning from turnstile's run, one from the baseline's process:\n{stderr}"
    );
    assert_eq!(report["turns_ok"], 20, "{report:#}");
    assert_eq!(report["baseline"]["ractor"]["turns_ok"], 20, "{report:#}");
    // The wait (a second for each design here) is not part of the run's figures: twenty echo
    // turns take far less.
    for figures in [&report, &report["baseline"]["ractor"]] {
        let elapsed = figures["elapsed_sec"].as_f64().expect("elapsed_sec");
        assert!(elapsed < 1.0, "the wait was measured: {figures:#}");
    }
}

#[test]
fn without_baselines_nothing_waits_for_the_machine() {
    let burners = Burners::start();
    let (report, stderr) = load(&[]);
    drop(burners);
    assert!(!stderr.contains(STAYED_BUSY), "{stderr}");
    assert_eq!(report["turns_ok"], 20, "{report:#}");
}
