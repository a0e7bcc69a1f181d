//! Property: `turnstile load --json` prints one JSON object with every field `docs/load.md`
//! documents, for turnstile and under `baseline` for each `--baseline` design, and the figures
//! agree with the workload that was asked for.

mod support;

use serde_json::Value;
use support::cli::turnstile_json;

/// The per-design figures documented in `docs/load.md`.
const FIGURES: &[&str] = &[
    "turns_ok",
    "turns_failed",
    "turns_interrupted",
    "turns_superseded",
    "turns_merged",
    "turns_per_sec",
    "elapsed_sec",
    "cpu_sec",
    "cpu_us_per_turn",
    "latency_us",
    "latency_budget_us",
    "ttfc_us",
    "offered_rate",
    "achieved_rate",
    "steps",
    "max_rate_within_slo",
    "share_over_budget",
    "activations",
    "evictions",
    "evictions_idle",
    "evictions_lru",
    "interrupts",
    "rejections",
    "failures_by_reason",
    "lost",
    "duplicated",
    "reordered",
    "misanswered",
    "busy_but_stored",
    "peak_live_sessions",
    "sampled_peak_live_sessions",
    "peak_rss_bytes",
    "rss_before_bytes",
    "rss_at_peak_bytes",
    "bytes_per_live_session",
];

/// The run's settings, at the top level only.
const SETTINGS: &[&str] = &[
    "run_id",
    "store",
    "agent",
    "latency_ms",
    "chunks",
    "policy",
    "sessions",
    "turns_per_session",
    "concurrency",
    "burst",
    "think_ms",
    "interrupt_rate",
    "baseline",
    "target",
];

fn check_figures(name: &str, figures: &Value) {
    for field in FIGURES {
        assert!(
            figures.get(field).is_some(),
            "{name}: no {field} in {figures:#}"
        );
    }
    for p in ["p50", "p90", "p99", "p999", "max"] {
        assert!(figures["latency_us"][p].is_u64(), "{name}: latency_us.{p}");
    }
    for reason in [
        "busy",
        "overloaded",
        "at_capacity",
        "concurrency_limit",
        "draining",
    ] {
        assert!(
            figures["failures_by_reason"][reason].is_u64(),
            "{name}: {reason}"
        );
    }
    assert_eq!(figures["turns_ok"], 120, "{name}: every turn acknowledged");
    assert_eq!(figures["turns_failed"], 0, "{name}");
    for integrity in [
        "lost",
        "duplicated",
        "reordered",
        "misanswered",
        "busy_but_stored",
    ] {
        assert_eq!(figures[integrity], 0, "{name}: {integrity}");
    }
    assert_eq!(
        figures["activations"], 40,
        "{name}: one activation per session"
    );
    assert!(
        figures["turns_per_sec"].as_f64().unwrap_or(0.0) > 0.0,
        "{name}"
    );
    assert!(
        figures["peak_rss_bytes"].as_u64().unwrap_or(0) > 0,
        "{name}"
    );
    let cpu = figures["cpu_sec"].as_f64().unwrap_or(0.0);
    assert!(cpu > 0.0, "{name}: cpu_sec {cpu}");
    let per_turn = figures["cpu_us_per_turn"].as_f64().unwrap_or(0.0);
    assert!(
        (per_turn - cpu * 1e6 / 120.0).abs() <= per_turn * 1e-6 + 1e-9,
        "{name}: cpu_us_per_turn {per_turn} for {cpu} s over 120 turns"
    );
    assert!(
        figures["peak_live_sessions"].as_u64().unwrap_or(0) > 0,
        "{name}"
    );
    // A quarter of the 40 ms turns are interrupted when they stream their first chunk (of 4),
    // i.e. with 30 ms still to run: those are cut short.
    let interrupted = figures["turns_interrupted"].as_u64().unwrap_or(0);
    assert!(
        (15..=45).contains(&interrupted),
        "{name}: {interrupted} interrupted"
    );
    assert!(figures["interrupts"].as_u64().unwrap_or(0) > 0, "{name}");
}

#[test]
fn the_json_report_has_every_documented_field_for_turnstile_and_its_baselines() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store=memory",
        "--sessions=40",
        "--turns=3",
        "--concurrency=8",
        "--latency=40",
        "--interrupt-rate=0.25",
        "--baseline=ractor,mutex-gate",
        "--json",
    ]);
    assert!(run.success, "{}", run.stderr);
    for field in SETTINGS {
        assert!(report.get(field).is_some(), "no {field} in {report:#}");
    }
    assert_eq!(report["sessions"], 40);
    assert_eq!(report["latency_budget_us"], 42_000);
    check_figures("turnstile", &report);
    let baselines = report["baseline"]
        .as_object()
        .expect("baseline is an object");
    assert_eq!(
        baselines.keys().collect::<Vec<_>>(),
        vec!["mutex-gate", "ractor"]
    );
    for (name, figures) in baselines {
        check_figures(name, figures);
        assert!(figures.get("error").is_none(), "{name}: {figures:#}");
        assert!(
            figures["turnstile_throughput_ratio"]
                .as_f64()
                .unwrap_or(0.0)
                > 0.0
        );
    }
}

/// A baseline that cannot run (here: its sibling store folder is a file) gets an `error` in its
/// entry, turnstile's own figures are still printed, and the command exits non-zero.
#[test]
fn a_failed_baseline_is_reported_in_its_entry_without_hiding_turnstiles_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    std::fs::write(dir.path().join("store-ractor"), b"not a folder").expect("block the sibling");
    let (run, report) = turnstile_json(&[
        "load",
        &format!("--store=file:{}", root.display()),
        "--sessions=10",
        "--turns=2",
        "--baseline=ractor",
        "--json",
    ]);
    assert!(
        !run.success,
        "a baseline that did not run must fail the command"
    );
    assert_eq!(report["turns_ok"], 20, "{report:#}");
    assert_eq!(report["lost"], 0, "{report:#}");
    let ractor = &report["baseline"]["ractor"];
    assert!(
        ractor["error"]
            .as_str()
            .is_some_and(|e| e.contains("ractor")),
        "{ractor:#}"
    );
    assert!(ractor.get("turns_ok").is_none(), "no figures: {ractor:#}");
}
