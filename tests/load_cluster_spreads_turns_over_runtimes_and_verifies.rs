//! `turnstile load --cluster N` runs N runtimes that share the store's sessions one owner at a
//! time: turns sent to a non-owner go on to the owner (`cluster.forwarded`), and the
//! verification pass still finds every acknowledged turn once and in order. Stores that keep no
//! leases are refused with a message naming the ones that do.

mod support;

use support::cli::{turnstile, turnstile_json};

#[test]
fn three_runtimes_share_the_sessions_and_lose_nothing() {
    let (run, report) = turnstile_json(&[
        "load",
        "--store",
        "memory",
        "--cluster",
        "3",
        "--sessions",
        "60",
        "--turns",
        "6",
        "--concurrency",
        "30",
        "--agent",
        "echo",
        "--json",
    ]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(report["cluster"]["processes"], 3);
    let forwarded = report["cluster"]["forwarded"].as_u64().expect("forwarded");
    assert!(
        forwarded > 0,
        "turns reached runtimes that did not own them: {report}"
    );
    assert_eq!(report["turns_ok"], 360);
    for field in ["lost", "duplicated", "reordered", "misanswered"] {
        assert_eq!(report[field], 0, "{field}");
    }
}

#[test]
fn a_store_without_leases_is_refused() {
    let run = turnstile(&["load", "--store", "file:tmp", "--cluster", "2"]);
    assert!(!run.success);
    assert!(run.stderr.contains("keeps leases"), "{}", run.stderr);
    let run = turnstile(&[
        "load",
        "--store",
        "memory",
        "--cluster",
        "2",
        "--burst",
        "2",
    ]);
    assert!(!run.success);
    assert!(run.stderr.contains("--burst 1"), "{}", run.stderr);
}
