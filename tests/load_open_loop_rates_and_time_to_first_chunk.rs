//! `turnstile load --rate` sends turns on a schedule and measures each from when it was due, so
//! a service slower than the rate shows its queue in the percentiles (a closed-loop run of the
//! same service does not); `--stream` reports the time to each turn's first chunk; `--rate-curve`
//! reports each step; bad schedules are refused before anything runs.

mod support;

use serde_json::Value;
use support::cli::{turnstile, turnstile_json};

fn p99(report: &Value) -> u64 {
    report["latency_us"]["p99"].as_u64().expect("p99")
}

fn clean(report: &Value) {
    for field in ["lost", "duplicated", "reordered", "misanswered"] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }
}

/// Four sessions with a 20 ms agent serve at most ~200 turns/s. Offered 400/s, the open-loop run
/// queues (each session's queue stays below its limit of 64) and its p99 (from each turn's due
/// time) grows to about half a second; the closed-loop run of the same service waits for each
/// answer and reports about the agent's latency.
#[test]
fn an_open_loop_run_shows_the_queue_a_closed_loop_run_hides() {
    let service = [
        "load",
        "--store",
        "memory",
        "--sessions",
        "4",
        "--turns",
        "50",
        "--agent",
        "mock",
        "--latency",
        "20",
        "--chunks",
        "1",
        "--json",
    ];
    let (run, closed) = turnstile_json(&service);
    assert!(run.success, "{}", run.stderr);
    let mut open_args = service.to_vec();
    open_args.extend(["--rate", "400"]);
    let (run, open) = turnstile_json(&open_args);
    assert!(run.success, "{}", run.stderr);
    clean(&closed);
    clean(&open);
    assert_eq!(open["turns_ok"], 200);
    assert!(closed["offered_rate"].is_null());
    let offered = open["offered_rate"].as_f64().expect("offered_rate");
    assert!((300.0..=440.0).contains(&offered), "offered {offered}");
    assert!(
        open["achieved_rate"].as_f64().expect("achieved") < offered * 0.6,
        "the service cannot keep up: {open}"
    );
    assert!(p99(&closed) < 200_000, "closed loop p99 {}", p99(&closed));
    assert!(
        p99(&open) > 300_000 && p99(&open) > 5 * p99(&closed),
        "open loop p99 {} vs closed {}",
        p99(&open),
        p99(&closed)
    );
}

/// With `--stream`, the time to the first of 4 chunks of a 40 ms turn is a fraction of the whole
/// turn's latency.
#[test]
fn streamed_runs_report_time_to_first_chunk() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store",
        "memory",
        "--sessions",
        "20",
        "--turns",
        "5",
        "--concurrency",
        "20",
        "--agent",
        "mock",
        "--latency",
        "40",
        "--chunks",
        "4",
        "--stream",
        "--json",
    ]);
    assert!(run.success, "{}", run.stderr);
    clean(&report);
    let ttfc = report["ttfc_us"]["p50"].as_u64().expect("ttfc p50");
    let whole = report["latency_us"]["p50"].as_u64().expect("latency p50");
    let share = ttfc as f64 / whole as f64;
    assert!(
        (0.1..0.7).contains(&share),
        "first chunk {ttfc} µs of {whole} µs"
    );
    let (_, unstreamed) = turnstile_json(&[
        "load",
        "--store",
        "memory",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--json",
    ]);
    assert!(unstreamed["ttfc_us"].is_null());
}

/// A rate curve reports every step it ran, with the highest rate within `--slo-ms`.
#[test]
fn a_rate_curve_reports_each_step() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store",
        "memory",
        "--sessions",
        "50",
        "--turns",
        "4",
        "--agent",
        "echo",
        "--rate-curve",
        "100:1s,200:1s",
        "--slo-ms",
        "1000",
        "--json",
    ]);
    assert!(run.success, "{}", run.stderr);
    clean(&report);
    let steps = report["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{report}");
    assert_eq!(steps[0]["offered_rate"], 100.0);
    assert_eq!(steps[0]["sent"], 100);
    assert_eq!(steps[1]["sent"], 100);
    assert_eq!(report["max_rate_within_slo"], 200.0);
}

#[test]
fn meaningless_schedules_are_refused() {
    for (args, expected) in [
        (vec!["load", "--rate", "0"], "bad rate"),
        (vec!["load", "--rate-curve", "100"], "expected steps"),
        (vec!["load", "--rate", "10", "--burst", "2"], "--burst 1"),
        (vec!["load", "--slo-ms", "20"], "--rate-curve"),
    ] {
        let run = turnstile(&args);
        assert!(!run.success, "{args:?}");
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
    }
}

/// `--duration` bounds a run that would otherwise take long: no turn is sent after it, and what
/// was sent is answered and verified.
#[test]
fn duration_bounds_a_run() {
    for extra in [&[][..], &["--rate", "1000"][..]] {
        let mut args = vec![
            "load",
            "--store",
            "memory",
            "--sessions",
            "100",
            "--turns",
            "1000",
            "--agent",
            "mock",
            "--latency",
            "20",
            "--duration",
            "0.5",
            "--json",
        ];
        args.extend(extra);
        let (run, report) = turnstile_json(&args);
        assert!(run.success, "{args:?}: {}", run.stderr);
        clean(&report);
        let ok = report["turns_ok"].as_u64().expect("turns_ok");
        assert!(ok > 0 && ok < 100_000, "{args:?}: {ok} turns");
        let elapsed = report["elapsed_sec"].as_f64().expect("elapsed");
        assert!(elapsed < 10.0, "{args:?}: ran {elapsed} s");
    }
    let run = turnstile(&["load", "--duration", "0"]);
    assert!(run.stderr.contains("bad duration"), "{}", run.stderr);
}
