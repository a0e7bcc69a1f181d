//! Property: with `--burst`, several turns of a session are in flight at once, so the overlap
//! policy decides what becomes of them; the report counts those outcomes and the verification
//! pass accepts exactly what the policy promises (a superseded input stored marked as such at its
//! acknowledged seq, a `Busy` one not stored at all).

mod support;

use serde_json::Value;
use support::cli::turnstile_json;

/// 20 sessions × 6 turns in bursts of 3 against 50 ms turns: the second and third turn of each
/// burst arrive while the first runs.
fn run(policy: &str) -> Value {
    let (run, report) = turnstile_json(&[
        "load",
        "--store=memory",
        "--sessions=20",
        "--turns=6",
        "--burst=3",
        "--latency=50",
        &format!("--policy={policy}"),
        "--json",
    ]);
    assert!(run.success, "{policy}: {}\n{report:#}", run.stderr);
    assert_eq!(report["burst"], 3);
    for integrity in [
        "lost",
        "duplicated",
        "reordered",
        "misanswered",
        "busy_but_stored",
    ] {
        assert_eq!(report[integrity], 0, "{policy}: {integrity} in {report:#}");
    }
    report
}

#[test]
fn latest_supersedes_queued_turns_and_verifies_clean() {
    let report = run("latest");
    assert!(
        report["turns_superseded"].as_u64().unwrap_or(0) > 0,
        "{report:#}"
    );
    // Superseded messages are acknowledged (they are in the history), so nothing failed.
    assert_eq!(report["turns_ok"], 120, "{report:#}");
    assert_eq!(report["turns_failed"], 0, "{report:#}");
}

#[test]
fn reject_answers_busy_and_stores_nothing_of_the_rejected_turns() {
    let report = run("reject");
    let busy = report["failures_by_reason"]["busy"].as_u64().unwrap_or(0);
    assert!(busy > 0, "{report:#}");
    assert_eq!(
        report["turns_ok"].as_u64().unwrap_or(0) + busy,
        120,
        "{report:#}"
    );
}
