//! Property: `turnstile serve`'s memory flags are checked before anything is served — an
//! unknown memory store or ingestion moment, `--auto-recall` without a memory store, and an
//! out-of-range `--auto-recall` are refused with a message naming what is expected.

mod support;

use support::cli::turnstile;

fn refused(args: &[&str], expected: &str) {
    let mut all = vec!["serve", "--addr", "127.0.0.1:0", "--store", "memory"];
    all.extend_from_slice(args);
    let run = turnstile(&all);
    assert!(!run.success, "turnstile {all:?} should have failed");
    assert!(
        run.stderr.contains(expected),
        "turnstile {all:?}: expected {expected:?} in:\n{}",
        run.stderr
    );
    assert!(
        !run.stdout.contains("listening"),
        "it served: {}",
        run.stdout
    );
}

#[test]
fn bad_memory_flags_are_refused_with_what_is_expected() {
    refused(
        &["--memory", "sqlite:x"],
        "expected off, memory, file:DIR or redis://HOST:PORT",
    );
    refused(&["--memory", "file:"], "file:DIR");
    refused(
        &["--memory", "memory", "--memory-ingest", "sometimes"],
        "expected passivation, compaction or explicit",
    );
    refused(
        &["--auto-recall", "3"],
        "--auto-recall needs a memory store",
    );
    refused(
        &["--memory", "memory", "--auto-recall", "0"],
        "auto_recall must be between 1 and 100",
    );
}
