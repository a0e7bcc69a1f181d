//! Property: the `turnstile sessions` admin commands work end to end on a file store. `show`
//! prints the statistics the runtime kept for sessions a real `turnstile load` run wrote (turns,
//! interrupted, superseded, merged, compactions, token usage, or "not reported"); `list` prints
//! whole canonical keys that `show` and `delete` accept; `list`, `show`, `delete`, `delete-user`
//! and `gc` succeed and their `--json` output parses with the fields `docs/load.md` documents.

mod support;

use std::path::Path;

use serde_json::Value;
use support::cli::{turnstile, turnstile_json, Run};
use turnstile::backend::FileStore;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

/// `turnstile sessions --store file:ROOT ARGS…`.
fn sessions(root: &Path, args: &[&str]) -> Run {
    let store = format!("file:{}", root.display());
    turnstile(&[&["sessions", "--store", &store], args].concat())
}

/// Like [`sessions`] with `--json`, parsing the output.
fn sessions_json(root: &Path, args: &[&str]) -> (Run, Value) {
    let store = format!("file:{}", root.display());
    turnstile_json(&[&["sessions", "--json", "--store", &store], args].concat())
}

/// One `turnstile load` run of a single session on the file store at `root`; returns its report
/// and the session's key. With one session, the report's totals are that session's.
fn load_one_session(root: &Path, flags: &[&str]) -> (Value, String) {
    let store = format!("--store=file:{}", root.display());
    let common = ["load", "--sessions=1", "--concurrency=1", "--json", &store];
    let (run, report) = turnstile_json(&[&common[..], flags].concat());
    assert!(run.success, "load {flags:?}: {}\n{report:#}", run.stderr);
    let run_id = report["run_id"].as_str().expect("a run id");
    (report.clone(), format!("user0/load-{run_id}-0"))
}

fn u(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {value}"))
}

/// `show --json` for `key`, checked for its documented fields; returns the record's statistics.
fn shown_stats(root: &Path, key: &str) -> Value {
    let (run, shown) = sessions_json(root, &["show", key]);
    assert!(run.success, "{}", run.stderr);
    for field in ["key", "record", "events"] {
        assert!(shown.get(field).is_some(), "no {field} in {shown:#}");
    }
    assert_eq!(shown["key"], key);
    shown["record"]["stats"].clone()
}

/// `show` as text for `key`.
fn shown_text(root: &Path, key: &str) -> String {
    let run = sessions(root, &["show", key]);
    assert!(run.success, "{}", run.stderr);
    run.stdout
}

#[test]
fn show_prints_the_statistics_a_load_run_left_in_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");

    // latest: bursts of 3 supersede and cut short turns; half the turns are interrupted;
    // compaction runs every few events; the mock agent reports token usage.
    let (report, key) = load_one_session(
        &root,
        &[
            "--turns=6",
            "--burst=3",
            "--policy=latest",
            "--latency=40",
            "--interrupt-rate=0.5",
            "--window=2",
            "--compact-after=3",
        ],
    );
    let stats = shown_stats(&root, &key);
    let (ok, superseded, merged) = (
        u(&report["turns_ok"]),
        u(&report["turns_superseded"]),
        u(&report["turns_merged"]),
    );
    assert!(superseded > 0, "the run must exercise latest: {report:#}");
    assert_eq!(u(&stats["turns"]), ok - superseded - merged, "{stats:#}");
    assert_eq!(stats["superseded"], report["turns_superseded"], "{stats:#}");
    assert_eq!(
        stats["interrupted"], report["turns_interrupted"],
        "{stats:#}"
    );
    assert!(u(&stats["interrupted"]) > 0, "{stats:#}");
    assert!(u(&stats["compactions"]) > 0, "{stats:#}");
    assert!(u(&stats["input_tokens"]) > 0 && u(&stats["output_tokens"]) > 0);
    let text = shown_text(&root, &key);
    for line in [
        format!("session       {key}"),
        format!(
            "turns         {} (interrupted {}, superseded {}, merged {}); failed {}",
            stats["turns"],
            stats["interrupted"],
            stats["superseded"],
            stats["merged"],
            stats["failed"]
        ),
        format!("compactions   {}", stats["compactions"]),
        format!(
            "tokens        {} in, {} out",
            stats["input_tokens"], stats["output_tokens"]
        ),
    ] {
        assert!(text.contains(&line), "no {line:?} in:\n{text}");
    }

    // merge: the later turns of each burst are answered by one turn together. Every input of
    // a batch is marked merged; all but its last are answered `Merged`.
    let (report, key) = load_one_session(
        &root,
        &["--turns=6", "--burst=3", "--policy=merge", "--latency=40"],
    );
    let stats = shown_stats(&root, &key);
    let merged = u(&report["turns_merged"]);
    assert!(merged > 0, "the run must exercise merge: {report:#}");
    assert!(u(&stats["merged"]) > merged, "{stats:#}\n{report:#}");
    assert_eq!(u(&stats["turns"]), u(&report["turns_ok"]) - merged);
    let text = shown_text(&root, &key);
    assert!(
        text.contains(&format!("merged {})", stats["merged"])),
        "{text}"
    );

    // The echo agent reports no usage: nothing to show, rather than "0 in, 0 out".
    let (_, key) = load_one_session(&root, &["--turns=2", "--agent=echo"]);
    let text = shown_text(&root, &key);
    assert!(text.contains("tokens        not reported"), "{text}");
}

/// Three sessions of alice (one with an id longer than any column, holding a `/`) and one of bob.
async fn seed(root: &Path) -> Vec<SessionKey> {
    let store = FileStore::open(root).expect("open");
    let keys = [
        (
            "alice",
            "a conversation id far longer than forty characters/with a slash",
        ),
        ("alice", "s2"),
        ("alice", "s3"),
        ("bob", "b1"),
    ]
    .map(|(user, session)| SessionKey::new(user, session).expect("key"));
    for key in &keys {
        let v = store
            .append(key, 0, &turn_events(1, "hello", None))
            .await
            .expect("append");
        store
            .append(key, v, &turn_events(3, "again", None))
            .await
            .expect("append");
    }
    keys.to_vec()
} // The store is dropped: the binary needs the root's lock.

#[tokio::test]
async fn list_prints_whole_keys_that_show_and_delete_accept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = seed(dir.path()).await;
    let long = keys[0].to_string();
    assert!(long.contains("%2F") && long.len() > 60, "{long}");

    let run = sessions(dir.path(), &["list", "--user", "alice"]);
    assert!(run.success, "{}", run.stderr);
    let listed: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .filter_map(|line| line.split("  ").last())
        .map(str::trim)
        .collect();
    let expected: Vec<String> = keys[..3].iter().map(ToString::to_string).collect();
    assert_eq!(listed, expected, "{}", run.stdout);

    for key in &listed {
        let text = shown_text(dir.path(), key);
        assert!(text.contains(&format!("session       {key}")), "{text}");
        assert!(text.contains("tokens        not reported"), "{text}");
    }
    let run = sessions(dir.path(), &["delete", listed[0]]);
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("deleted {long}")),
        "{}",
        run.stdout
    );
    let run = sessions(dir.path(), &["show", &long]);
    assert!(!run.success, "the session is gone");
}

#[tokio::test]
async fn admin_commands_succeed_and_answer_documented_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = seed(dir.path()).await;
    let root = dir.path();

    // list: a page of metadata, and a cursor while more remain.
    let (run, page) = sessions_json(root, &["list", "--user", "alice", "--limit", "2"]);
    assert!(run.success, "{}", run.stderr);
    let first = page["sessions"].as_array().expect("sessions");
    assert_eq!(first.len(), 2, "{page:#}");
    for meta in first {
        for field in [
            "key",
            "version",
            "events",
            "created_ms",
            "updated_ms",
            "stats",
        ] {
            assert!(meta.get(field).is_some(), "no {field} in {meta:#}");
        }
        assert_eq!(meta["events"], 4, "{meta:#}");
        assert_eq!(meta["stats"]["turns"], 2, "{meta:#}");
    }
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a cursor: one more session");
    let (run, rest) = sessions_json(
        root,
        &[
            "list", "--user", "alice", "--limit", "2", "--cursor", cursor,
        ],
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(rest["sessions"].as_array().map(Vec::len), Some(1));
    assert!(rest["next_cursor"].is_null(), "{rest:#}");

    // delete: true once, then false with a failing exit.
    let key = keys[1].to_string();
    let (run, deleted) = sessions_json(root, &["delete", &key]);
    assert!(run.success, "{}", run.stderr);
    // No artifact was ever saved: the store's `artifacts/` folder holds none to remove.
    assert_eq!(
        deleted,
        serde_json::json!({ "key": key, "deleted": true, "artifacts_deleted": 0 })
    );
    let (run, again) = sessions_json(root, &["delete", &key]);
    assert!(!run.success, "deleting a missing session exits non-zero");
    assert_eq!(again["deleted"], false);

    // delete-user: every session of the user.
    let (run, gone) = sessions_json(root, &["delete-user", "bob"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        gone,
        serde_json::json!({ "user": "bob", "deleted": 1, "artifacts_deleted": 0 })
    );

    // gc: alice has two sessions left; keep one.
    let (run, collected) = sessions_json(root, &["gc", "--max-sessions", "1"]);
    assert!(run.success, "{}", run.stderr);
    let removed = collected["removed"].as_array().expect("removed");
    assert_eq!(removed.len(), 1, "{collected:#}");
    let survivors = [keys[0].to_string(), keys[2].to_string()];
    assert!(
        survivors.iter().any(|k| removed[0] == k.as_str()),
        "{collected:#}"
    );

    let (_, left) = sessions_json(root, &["list", "--user", "alice"]);
    assert_eq!(
        left["sessions"].as_array().map(Vec::len),
        Some(1),
        "{left:#}"
    );
    let (_, bob) = sessions_json(root, &["list", "--user", "bob"]);
    assert_eq!(bob["sessions"].as_array().map(Vec::len), Some(0), "{bob:#}");
}
