//! `turnstile load --target URL` sends the workload to a running `turnstile serve` over HTTP and
//! verifies it by reading every session back through the events endpoint: against a memory
//! store and a file store, every turn is acknowledged and found once, in order, answered at its
//! seq; bursts under the overlap policies and interrupts sent over HTTP verify clean too.

mod support;

use serde_json::Value;
use support::cli::turnstile_json;
use support::http::ADMIN;
use support::serve::{Serve, ServeStore};

fn clean(report: &Value) {
    for field in [
        "lost",
        "duplicated",
        "reordered",
        "misanswered",
        "busy_but_stored",
    ] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }
}

fn load(serve: &Serve, extra: &[&str]) -> Value {
    let mut args = vec![
        "load",
        "--target",
        &serve.base,
        "--token",
        ADMIN,
        "--sessions",
        "40",
        "--turns",
        "5",
        "--concurrency",
        "16",
        "--json",
    ];
    args.extend(extra);
    let (run, report) = turnstile_json(&args);
    assert!(run.success, "{args:?}: {}\n{}", run.stderr, run.stdout);
    clean(&report);
    report
}

#[test]
fn a_run_over_http_loses_nothing_on_a_memory_or_a_file_store() {
    for store in [ServeStore::Memory, ServeStore::File] {
        let serve = Serve::start(store, 2, 2, &[]);
        let report = load(&serve, &[]);
        assert_eq!(report["turns_ok"], 200, "{store:?}: {report}");
        assert_eq!(report["turns_failed"], 0, "{store:?}: {report}");
        assert_eq!(report["target"], serde_json::json!([serve.base]));
        assert_eq!(
            report["activations"], 40,
            "{store:?}: the server's own counter"
        );
        // A second run against the same server is verified apart from the first.
        let again = load(&serve, &["--stream"]);
        assert_eq!(again["turns_ok"], 200, "{store:?}: {again}");
    }
}

#[test]
fn bursts_under_each_policy_and_interrupts_verify_over_http() {
    let serve = Serve::start(ServeStore::Memory, 20, 4, &[]);
    for policy in ["queue", "latest", "merge", "reject"] {
        let report = load(
            &serve,
            &["--burst", "3", "--policy", policy, "--latency", "20"],
        );
        let ok = report["turns_ok"].as_u64().expect("turns_ok");
        match policy {
            "queue" => assert_eq!(ok, 200, "{report}"),
            // A newer message cuts the running turn, or supersedes one still queued: which of
            // the two depends on how fast the cut turn ends, so count both.
            "latest" => {
                let cut = report["turns_superseded"].as_u64().unwrap_or(0)
                    + report["turns_interrupted"].as_u64().unwrap_or(0);
                assert!(ok == 200 && cut > 0, "{report}");
            }
            "merge" => assert!(report["turns_merged"].as_u64() > Some(0), "{report}"),
            _ => assert!(
                report["failures_by_reason"]["busy"].as_u64() > Some(0),
                "{report}"
            ),
        }
    }
    let report = load(
        &serve,
        &[
            "--interrupt-rate",
            "0.5",
            "--latency",
            "20",
            "--chunks",
            "4",
        ],
    );
    assert!(report["interrupts"].as_u64() > Some(10), "{report}");
    assert!(report["turns_interrupted"].as_u64() > Some(10), "{report}");
}
