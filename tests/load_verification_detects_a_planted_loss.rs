//! Property: the verification pass of `turnstile load` catches a store that acknowledges a write
//! it never made: the lost turn is counted and the command exits non-zero.
//!
//! The fault is planted with the hidden `--fault-drop-one-append` flag, which wraps the store so
//! that its first append answers `Ok` without writing.

mod support;

use support::cli::turnstile_json;

#[test]
fn a_store_that_drops_an_acknowledged_append_fails_the_run() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store=memory",
        "--sessions=20",
        "--turns=3",
        "--json",
        "--fault-drop-one-append",
    ]);
    assert!(!run.success, "a lost turn must make the run fail");
    assert!(report["lost"].as_u64().unwrap_or(0) >= 1, "{report:#}");
}

#[test]
fn the_same_run_without_the_fault_passes() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store=memory",
        "--sessions=20",
        "--turns=3",
        "--json",
    ]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(report["lost"], 0);
    assert_eq!(report["turns_ok"], 60);
}
