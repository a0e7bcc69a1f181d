//! `turnstile sessions check-acks` reads `load --ack-log` files against the store after the
//! fact (the soak script kills its load runs, so their own verification never runs): a clean run
//! checks clean, and a run whose store dropped an acknowledged append is reported, exit 1.

mod support;

use support::cli::turnstile;

fn ack_run(dir: &std::path::Path, log: &str, extra: &[&str]) {
    let store = format!("file:{}", dir.join("store").display());
    let ack_log = dir.join(log);
    let mut args = vec![
        "load",
        "--store",
        &store,
        "--sessions",
        "5",
        "--turns",
        "4",
        "--agent",
        "echo",
        "--progress",
        "never",
        "--ack-log",
    ];
    let ack_log = ack_log.to_str().expect("utf-8 path").to_owned();
    args.push(&ack_log);
    args.extend(extra);
    turnstile(&args);
}

#[test]
fn a_clean_run_checks_clean_and_a_dropped_append_is_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("file:{}", dir.path().join("store").display());
    ack_run(dir.path(), "clean.log", &[]);
    let clean = dir.path().join("clean.log");
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "--json",
        "check-acks",
        clean.to_str().unwrap(),
    ]);
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    assert_eq!(report["acks"], 20);
    assert_eq!(report["clean"], true);

    ack_run(dir.path(), "lossy.log", &["--fault-drop-one-append"]);
    let lossy = dir.path().join("lossy.log");
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "check-acks",
        clean.to_str().unwrap(),
        lossy.to_str().unwrap(),
    ]);
    assert!(
        !run.success,
        "a planted loss must fail the check: {}",
        run.stdout
    );
    assert!(run.stdout.contains("lost 1"), "{}", run.stdout);

    let garbage = dir.path().join("garbage.log");
    std::fs::write(&garbage, "not-a-key x\n").expect("write");
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "check-acks",
        garbage.to_str().unwrap(),
    ]);
    assert!(!run.success);
    assert!(run.stderr.contains("KEY SEQ"), "{}", run.stderr);
}
