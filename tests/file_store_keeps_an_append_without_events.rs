//! Property: an append with no events is acknowledged with a new version, so that version must
//! survive a restart like any other — it never goes backwards, and the next append, based on it,
//! is accepted after a reopen instead of making the session unreadable.
//!
//! Such an append writes no log line that could carry a commit marker, so it is the only kind
//! whose durability rests on `head.json`; each case reopens the store to prove it landed.

mod support;

use std::path::Path;

use turnstile::backend::FileStore;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::find_one;

fn key() -> SessionKey {
    SessionKey::new("erin", "s").expect("valid key")
}

/// Reopens the store at `root` and returns the session's version and its events' seqs.
async fn reopened(root: &Path) -> (u64, Vec<u64>) {
    let store = FileStore::open(root).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load after reopen");
    let version = loaded.record.expect("the session exists").version;
    (version, loaded.events.iter().map(|e| e.seq).collect())
}

#[tokio::test]
async fn a_new_session_created_by_an_empty_append_keeps_its_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    assert_eq!(store.append(&key(), 0, &[]).await.expect("append"), 1);
    drop(store);
    assert_eq!(reopened(dir.path()).await, (1, vec![]));

    let store = FileStore::open(dir.path()).expect("reopen");
    let next = store
        .append(&key(), 1, &turn_events(1, "first words", None))
        .await
        .expect("an append based on the empty one's version");
    assert_eq!(next, 2);
    drop(store);
    assert_eq!(reopened(dir.path()).await, (2, vec![1, 2]));
}

#[tokio::test]
async fn an_empty_append_past_unheaded_appends_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    let mut version = 0;
    for seq in [1, 3, 5] {
        version = store
            .append(&key(), version, &turn_events(seq, "turn", None))
            .await
            .expect("append");
    }
    // Only the first append wrote the head; the other two are recorded by their markers.
    store.settle_files().await.expect("settle");
    let head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find_one(dir.path(), "head.json")).expect("read"))
            .expect("json");
    assert_eq!(head["version"], 1, "appends lie past the head");

    let empty = store.append(&key(), version, &[]).await.expect("append");
    assert_eq!(empty, version + 1);
    drop(store);
    assert_eq!(reopened(dir.path()).await, (empty, (1..=6).collect()));

    let store = FileStore::open(dir.path()).expect("reopen");
    let next = store
        .append(&key(), empty, &turn_events(7, "after", None))
        .await
        .expect("the next marked append follows the empty one's version");
    assert_eq!(next, empty + 1);
    drop(store);
    assert_eq!(reopened(dir.path()).await, (empty + 1, (1..=8).collect()));
}

#[tokio::test]
async fn an_empty_append_is_refused_on_a_stale_version_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    store
        .append(&key(), 0, &turn_events(1, "turn", None))
        .await
        .expect("append");
    store.settle_files().await.expect("settle");
    let head = std::fs::read(find_one(dir.path(), "head.json")).expect("read");
    let refused = store.append(&key(), 0, &[]).await;
    assert!(
        matches!(
            refused,
            Err(turnstile::StoreError::Conflict {
                expected: 0,
                found: 1,
                ..
            })
        ),
        "{refused:?}"
    );
    store.settle_files().await.expect("settle");
    assert_eq!(
        std::fs::read(find_one(dir.path(), "head.json")).expect("read"),
        head
    );
}
