//! Property: stored data that is corrupt or written by a newer turnstile gives a clear error
//! naming the session — from every operation — and its bytes are left exactly as they were;
//! the session is never reset to empty.

mod support;

use std::path::Path;

use serde_json::json;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::store::FileStore;
use turnstile::{SessionKey, Store, StoreError};

use support::stores::{find_one, temp_file_store};

fn key() -> SessionKey {
    SessionKey::new("alice", "s").expect("valid key")
}

/// Stores `turns` turns and returns the version.
async fn fill(store: &FileStore, turns: u64) -> u64 {
    let mut version = 0;
    for t in 0..turns {
        version = store
            .append(
                &key(),
                version,
                &turn_events(1 + 2 * t, &format!("m{t}"), None),
            )
            .await
            .expect("append");
    }
    version
}

/// Runs every operation that reads the damaged part and checks each fails with `expected`,
/// then checks the files are byte-for-byte unchanged. `appends_read_it` is false when the
/// damage is in acknowledged history, which an append (costing O(turn)) never reads.
async fn assert_refused_everywhere(
    store: &FileStore,
    root: &Path,
    version: u64,
    expected: fn(&StoreError) -> bool,
    appends_read_it: bool,
) {
    let before = snapshot(root);
    let k = key();
    let mut errors = vec![
        store.load(&k, 100).await.err(),
        store.read_events(&k, 1, 100).await.err(),
    ];
    if appends_read_it {
        errors.push(
            store
                .append(&k, version, &turn_events(11, "more", None))
                .await
                .err(),
        );
        errors.push(
            store
                .append(&k, 0, &turn_events(1, "fresh?", None))
                .await
                .err(),
        );
    }
    for error in errors {
        let error = error.expect("the operation must fail, not treat the session as empty");
        assert!(expected(&error), "unexpected error: {error:?}");
        assert!(
            error.to_string().contains("alice/s"),
            "names the session: {error}"
        );
    }
    assert_eq!(snapshot(root), before, "the stored bytes are untouched");
}

fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = support::stores::walk(root)
        .into_iter()
        .filter(|p| p.is_file() && !p.ends_with("turnstile.lock"))
        .map(|p| (p.display().to_string(), std::fs::read(&p).expect("read")))
        .collect();
    files.sort();
    files
}

fn is_corrupt(e: &StoreError) -> bool {
    matches!(e, StoreError::Corrupt { .. })
}

fn is_schema(e: &StoreError) -> bool {
    matches!(e, StoreError::Schema { .. })
}

#[tokio::test]
async fn a_corrupt_line_inside_the_acknowledged_log_is_reported_and_left_untouched() {
    let (dir, store) = temp_file_store();
    let version = fill(&store, 5).await;
    let log = find_one(dir.path(), "log.jsonl");
    let mut bytes = std::fs::read(&log).expect("read log");
    let third_line = bytes
        .split(|&b| b == b'\n')
        .take(2)
        .map(|l| l.len() + 1)
        .sum::<usize>();
    bytes[third_line..third_line + 8].copy_from_slice(b"#garbage");
    std::fs::write(&log, &bytes).expect("corrupt the log");
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, false).await;
}

#[tokio::test]
async fn a_corrupt_head_is_reported_not_taken_for_a_new_session() {
    let (dir, store) = temp_file_store();
    let version = fill(&store, 2).await;
    std::fs::write(
        find_one(dir.path(), "head.json"),
        b"{\"schema_version\": 1, \"key\"",
    )
    .expect("corrupt the head");
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

#[tokio::test]
async fn a_log_shorter_than_its_head_is_reported() {
    let (dir, store) = temp_file_store();
    let version = fill(&store, 3).await;
    let log = find_one(dir.path(), "log.jsonl");
    let len = std::fs::metadata(&log).expect("stat").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .and_then(|f| f.set_len(len / 2))
        .expect("shorten the log");
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

#[tokio::test]
async fn a_head_from_a_newer_turnstile_is_refused_and_never_overwritten() {
    let (dir, store) = temp_file_store();
    let version = fill(&store, 2).await;
    let head = find_one(dir.path(), "head.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&head).expect("read head")).expect("json");
    value["schema_version"] = json!(99);
    value["future_field"] = json!("keep me");
    std::fs::write(&head, value.to_string()).expect("write head");
    assert_refused_everywhere(&store, dir.path(), version, is_schema, true).await;
    let message = store
        .load(&key(), 1)
        .await
        .expect_err("refused")
        .to_string();
    assert!(message.contains("upgrade turnstile"), "{message}");
}

#[tokio::test]
async fn user_state_from_a_newer_turnstile_is_refused_and_the_turn_is_not_written() {
    let (dir, store) = temp_file_store();
    let delta: StateDelta = [("user:name".to_owned(), json!("Alice"))].into();
    let version = store
        .append(&key(), 0, &turn_events(1, "hi", Some(delta.clone())))
        .await
        .expect("append");
    let user_file = find_one(dir.path(), "user.json");
    std::fs::write(&user_file, r#"{"schema_version": 7, "state": {}}"#).expect("write");
    let before = snapshot(dir.path());
    let loaded = store.load(&key(), 5).await;
    assert!(
        matches!(loaded, Err(StoreError::Schema { .. })),
        "{loaded:?}"
    );
    let appended = store
        .append(&key(), version, &turn_events(3, "again", Some(delta)))
        .await;
    assert!(
        matches!(appended, Err(StoreError::Schema { .. })),
        "{appended:?}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "nothing was written, the log was rolled back"
    );
}
