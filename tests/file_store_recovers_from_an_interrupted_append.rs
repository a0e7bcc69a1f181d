//! Property: after a crash in the middle of an append, the log is the source of truth — complete
//! events past the head are folded back in, and a torn last line (never acknowledged) is dropped
//! and cut off by the next append, with no acknowledged event lost.

mod support;

use std::io::Write;
use std::path::Path;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::find_one;

fn key() -> SessionKey {
    SessionKey::new("bob", "s").expect("valid key")
}

fn delta(n: u64) -> Option<StateDelta> {
    Some([("n".to_owned(), json!(n))].into())
}

/// A store at `root` holding two turns; returns the version.
async fn two_turns(root: &Path) -> u64 {
    let store = FileStore::open(root).expect("open");
    let v1 = store
        .append(&key(), 0, &turn_events(1, "one", delta(1)))
        .await
        .expect("append");
    store
        .append(&key(), v1, &turn_events(3, "two", delta(2)))
        .await
        .expect("append")
}

fn append_raw(root: &Path, bytes: &[u8]) {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(find_one(root, "log.jsonl"))
        .expect("open log");
    log.write_all(bytes).expect("append raw bytes");
}

async fn assert_continues_cleanly(root: &Path, version: u64, turns: u64) {
    let store = FileStore::open(root).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load after the crash");
    let record = loaded.record.expect("head");
    assert_eq!(record.version, version);
    assert_eq!(loaded.events.len() as u64, 2 * turns);
    let next = store
        .append(
            &key(),
            version,
            &turn_events(2 * turns + 1, "after", delta(9)),
        )
        .await
        .expect("append after the crash");
    assert_eq!(next, version + 1);
    let events = store
        .read_events(&key(), 1, usize::MAX)
        .await
        .expect("read");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=2 * turns + 2).collect::<Vec<_>>(),
        "dense, nothing torn left"
    );
    store.settle_files().await.expect("settle");
    let text = std::fs::read_to_string(find_one(root, "log.jsonl")).expect("read log");
    assert!(text.ends_with('\n'));
    assert_eq!(
        text.lines().count() as u64,
        2 * turns + 2,
        "the torn bytes were cut"
    );
}

#[tokio::test]
async fn a_torn_last_line_without_a_newline_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    append_raw(dir.path(), br#"{"seq":5,"id":"1b4e28ba-2fa1-11d2-88"#);
    assert_continues_cleanly(dir.path(), version, 2).await;
}

#[tokio::test]
async fn an_unreadable_last_line_past_the_head_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    append_raw(dir.path(), b"\0\0\0\0\0\0\n");
    assert_continues_cleanly(dir.path(), version, 2).await;
}

#[tokio::test]
async fn events_past_the_head_are_folded_back_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    let v1 = store
        .append(&key(), 0, &turn_events(1, "one", delta(1)))
        .await
        .expect("append");
    store.settle_files().await.expect("settle");
    let head = find_one(dir.path(), "head.json");
    let old_head = std::fs::read(&head).expect("read head");
    let v2 = store
        .append(&key(), v1, &turn_events(3, "two", delta(2)))
        .await
        .expect("append");
    drop(store);
    // As if the process died after fsyncing the log but before replacing the head.
    std::fs::write(&head, old_head).expect("restore the old head");
    let store = FileStore::open(dir.path()).expect("reopen");
    let record = store
        .load(&key(), 10)
        .await
        .expect("load")
        .record
        .expect("head");
    assert_eq!(record.version, v2);
    assert_eq!(record.state["n"], json!(2), "the missing turn is folded in");
    assert_eq!(record.stats.turns, 2);
    drop(store);
    assert_continues_cleanly(dir.path(), v2, 2).await;
}

#[tokio::test]
async fn a_session_whose_first_head_never_landed_is_recovered_from_its_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    store
        .append(&key(), 0, &turn_events(1, "one", delta(1)))
        .await
        .expect("append");
    drop(store);
    std::fs::remove_file(find_one(dir.path(), "head.json")).expect("remove head");
    let store = FileStore::open(dir.path()).expect("reopen");
    let loaded = store.load(&key(), 10).await.expect("load");
    assert_eq!(loaded.record.expect("recovered head").version, 1);
    assert_eq!(loaded.events.len(), 2);
    let listed = store.list("bob", &Default::default()).await.expect("list");
    assert_eq!(listed.sessions.len(), 1);
}
