//! `turnstile load --target A,B --spread hash` sends each session's turns to one of the URLs by a
//! stable hash of its key, so two independent `serve` processes (each with its own store) both
//! receive turns, and each session is verified where it lives.

mod support;

use support::cli::turnstile_json;
use support::http::ADMIN;
use support::serve::{Serve, ServeStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_targets_both_receive_turns_and_verify_clean() {
    let a = Serve::start(ServeStore::Memory, 1, 1, &[]);
    let b = Serve::start(ServeStore::File, 1, 1, &[]);
    let targets = format!("{},{}/", a.base, b.base);
    let (run, report) = tokio::task::block_in_place(|| {
        turnstile_json(&[
            "load",
            "--target",
            &targets,
            "--spread",
            "hash",
            "--token",
            ADMIN,
            "--sessions",
            "40",
            "--turns",
            "3",
            "--json",
        ])
    });
    assert!(run.success, "{}", run.stderr);
    assert_eq!(report["turns_ok"], 120, "{report}");
    for field in ["lost", "duplicated", "reordered", "misanswered"] {
        assert_eq!(report[field], 0, "{field}: {report}");
    }
    assert_eq!(report["target"], serde_json::json!([a.base, b.base]));
    let (at_a, at_b) = (a.turns_answered().await, b.turns_answered().await);
    assert_eq!(at_a + at_b, 120, "every turn answered once");
    assert!(at_a > 10 && at_b > 10, "turns split {at_a} / {at_b}");
    // A session always went to one server: its three turns are all there.
    assert_eq!(at_a % 3, 0, "{at_a}");
}

/// The verification reads each session where its key hashes to: sent at random over two
/// processes that do not share their stores, a session's turns are split between them, and the
/// run fails with turns counted lost — the remote verification sees what the servers stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_spread_over_unshared_stores_fails_verification() {
    let a = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let b = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let targets = format!("{},{}", a.base, b.base);
    let (run, report) = tokio::task::block_in_place(|| {
        turnstile_json(&[
            "load",
            "--target",
            &targets,
            "--token",
            ADMIN,
            "--sessions",
            "20",
            "--turns",
            "4",
            "--json",
        ])
    });
    assert!(!run.success, "{report}");
    assert_eq!(report["turns_ok"], 80, "{report}");
    assert!(report["lost"].as_u64() > Some(10), "{report}");
}
