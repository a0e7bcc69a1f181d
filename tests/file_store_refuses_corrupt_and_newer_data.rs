//! Property: stored data that is corrupt or written by a newer turnstile gives a clear error
//! naming the session — from every operation — and its bytes are left exactly as they were;
//! the session is never reset to empty.

mod support;

use std::path::Path;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
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
    // While the store runs its files may lag behind the journal: bring them up to date
    // before they are damaged.
    store.settle_files().await.expect("settle");
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

/// Cuts the log to `len` bytes.
fn cut_log(root: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(find_one(root, "log.jsonl"))
        .and_then(|f| f.set_len(len))
        .expect("shorten the log");
}

/// How many log bytes `head.json` says it covers.
fn head_log_bytes(root: &Path) -> u64 {
    let head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find_one(root, "head.json")).expect("read head"))
            .expect("head is JSON");
    head["log_bytes"].as_u64().expect("log_bytes")
}

/// Drops `store` and opens its root again: nothing the first one remembered is left.
fn reopen(store: FileStore, root: &Path) -> FileStore {
    drop(store);
    FileStore::open(root).expect("reopen")
}

#[tokio::test]
async fn a_log_cut_inside_the_appends_past_its_head_is_reported_while_the_store_runs() {
    // Only the running store knows how many bytes it acknowledged: after a restart, a log cut
    // past the head reads like a crash in the middle of the last append (see docs/stores.md).
    let (dir, store) = temp_file_store();
    let version = fill(&store, 3).await;
    let len = std::fs::metadata(find_one(dir.path(), "log.jsonl"))
        .expect("stat")
        .len();
    assert!(
        len / 2 > head_log_bytes(dir.path()),
        "the cut falls past the head"
    );
    cut_log(dir.path(), len / 2);
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

#[tokio::test]
async fn a_log_shorter_than_its_head_is_reported_after_a_reopen() {
    let (dir, store) = temp_file_store();
    let version = fill(&store, 3).await;
    let covered = head_log_bytes(dir.path());
    assert!(covered > 0);
    let store = reopen(store, dir.path());
    cut_log(dir.path(), covered - 10);
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

#[tokio::test]
async fn a_head_that_ends_inside_a_line_is_reported() {
    // One append: the head covers the whole log, so only the line boundary can tell that it
    // does not describe this log (the newline it leaves out reads like a torn append).
    let (dir, store) = temp_file_store();
    let version = fill(&store, 1).await;
    let head_path = find_one(dir.path(), "head.json");
    let mut head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&head_path).expect("read head")).expect("json");
    let covered = head["log_bytes"].as_u64().expect("log_bytes");
    head["log_bytes"] = json!(covered - 1);
    std::fs::write(&head_path, head.to_string()).expect("write head");
    let store = reopen(store, dir.path());
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

/// The byte offset where the log's last line starts.
fn last_line_start(log: &[u8]) -> usize {
    log[..log.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |nl| nl + 1)
}

#[tokio::test]
async fn damage_to_the_last_acknowledged_append_is_reported_after_a_reopen_not_cut() {
    // Its marked line survives with the marker intact, so the append was written whole: this
    // is not the torn end of an unfinished append, and nothing may be cut.
    let (dir, store) = temp_file_store();
    let version = fill(&store, 5).await;
    let store = reopen(store, dir.path());
    let log = find_one(dir.path(), "log.jsonl");
    let mut bytes = std::fs::read(&log).expect("read log");
    let at = bytes.len() - 2;
    bytes[at] = b'#';
    std::fs::write(&log, &bytes).expect("damage the log");
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
}

#[tokio::test]
async fn a_changed_byte_in_the_last_acknowledged_append_fails_its_check() {
    // Still valid JSON, so only the CRC its marker records can tell.
    let (dir, store) = temp_file_store();
    let version = fill(&store, 5).await;
    let store = reopen(store, dir.path());
    let log = find_one(dir.path(), "log.jsonl");
    let mut bytes = std::fs::read(&log).expect("read log");
    let start = last_line_start(&bytes);
    let text = bytes[start..]
        .windows(2)
        .position(|w| w == b"m4")
        .expect("the last turn's text")
        + start;
    bytes[text + 1] = b'9';
    std::fs::write(&log, &bytes).expect("damage the log");
    assert_refused_everywhere(&store, dir.path(), version, is_corrupt, true).await;
    let message = store
        .load(&key(), 5)
        .await
        .expect_err("corrupt")
        .to_string();
    assert!(message.contains("CRC"), "{message}");
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
    store.settle_files().await.expect("settle");
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
