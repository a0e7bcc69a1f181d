//! Property: `--store file` names one place for every command — the data folder
//! (`$TURNSTILE_HOME` here) — so sessions a `load --store file` run wrote are the ones
//! `sessions --store file` lists; and `load` without `--store` uses a temporary folder that its
//! report names and that is gone when it exits, leaving the data folder untouched.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::cli::TURNSTILE;

/// Runs `turnstile ARGS… --json` with `TURNSTILE_HOME` set to `home`; returns the parsed output.
fn run_json(home: &Path, args: &[&str]) -> Value {
    let output = Command::new(TURNSTILE)
        .args(args)
        .arg("--json")
        .env("TURNSTILE_HOME", home)
        .env("RUST_LOG", "error")
        .output()
        .expect("run the turnstile binary");
    assert!(
        output.status.success(),
        "turnstile {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON output")
}

#[test]
fn load_and_sessions_share_the_data_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let load = ["load", "--store", "file", "--sessions=1", "--turns=2"];
    let report = run_json(&home, &load);
    assert_eq!(report["store"], format!("file:{}", home.display()));
    let run_id = report["run_id"].as_str().expect("a run id");
    let listed = run_json(
        &home,
        &["sessions", "--store", "file", "list", "--user", "user0"],
    );
    let keys: Vec<&str> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["key"].as_str())
        .collect();
    assert_eq!(keys, vec![format!("user0/load-{run_id}-0")]);
}

#[test]
fn load_by_default_names_its_temporary_folder_and_removes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let report = run_json(&home, &["load", "--sessions=2", "--turns=1"]);
    let store = report["store"].as_str().expect("the store is named");
    assert!(store.starts_with("file:tmp ("), "{store}");
    let folder = store["file:tmp (".len()..]
        .split(", removed at exit")
        .next()
        .expect("a folder");
    assert!(!Path::new(folder).exists(), "{folder} is removed at exit");
    assert!(!home.exists(), "the data folder is not touched");
}
