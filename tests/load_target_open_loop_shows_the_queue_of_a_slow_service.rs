//! `turnstile load --target URL --rate N` measures each turn from when it was due, so a service
//! slower than the offered rate shows its queue in the percentiles (no coordinated omission),
//! while a closed-loop run of the same service waits for each answer and reports about the
//! agent's latency.

mod support;

use serde_json::Value;
use support::cli::turnstile_json;
use support::http::ADMIN;
use support::serve::{Serve, ServeStore};

fn p99(report: &Value) -> u64 {
    report["latency_us"]["p99"].as_u64().expect("p99")
}

/// Four sessions with a 20 ms agent serve at most ~200 turns/s; offered 400/s, the queue grows
/// for the whole half second of arrivals.
#[test]
fn an_open_loop_run_over_http_shows_the_queue_a_closed_loop_run_hides() {
    let serve = Serve::start(ServeStore::Memory, 20, 1, &[]);
    let service = [
        "load",
        "--target",
        &serve.base,
        "--token",
        ADMIN,
        "--sessions",
        "4",
        "--turns",
        "50",
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
    for report in [&closed, &open] {
        assert_eq!(report["turns_ok"], 200, "{report}");
        for field in ["lost", "duplicated", "reordered", "misanswered"] {
            assert_eq!(report[field], 0, "{field}: {report}");
        }
    }
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
