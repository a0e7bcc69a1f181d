//! Property: `head.json` is a checkpoint rewritten only when due — after 32 appends past it, or
//! once 256 KiB of log lie past it, whichever comes first — so that the common append writes
//! only the log, and a cold read never has more than that to fold onto the head.

mod support;

use std::path::Path;

use turnstile::backend::FileStore;
use turnstile::state::{Author, Event, EventKind};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::find_one;

/// The documented checkpoint interval, in appends.
const HEAD_EVERY: u64 = 32;
/// The documented checkpoint interval, in log bytes past the head.
const HEAD_EVERY_BYTES: u64 = 256 * 1024;

fn key() -> SessionKey {
    SessionKey::new("heidi", "s").expect("valid key")
}

/// The version and `log_bytes` in `head.json`.
fn head(root: &Path) -> (u64, u64) {
    let head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find_one(root, "head.json")).expect("read head"))
            .expect("head is JSON");
    (
        head["version"].as_u64().expect("version"),
        head["log_bytes"].as_u64().expect("log_bytes"),
    )
}

fn log_len(root: &Path) -> u64 {
    std::fs::metadata(find_one(root, "log.jsonl"))
        .expect("stat log")
        .len()
}

#[tokio::test]
async fn the_head_is_rewritten_after_every_32_appends_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    let mut version = 0;
    let mut checkpoints = Vec::new();
    for t in 0..2 * HEAD_EVERY + 3 {
        version = store
            .append(&key(), version, &turn_events(1 + 2 * t, "chat-sized", None))
            .await
            .expect("append");
        // While the store runs its files may lag behind the journal: bring them up to date.
        store.settle_files().await.expect("settle");
        let (head_version, covered) = head(dir.path());
        if head_version == version {
            assert_eq!(
                covered,
                log_len(dir.path()),
                "a new head covers the whole log"
            );
            checkpoints.push(version);
        }
    }
    // The first append writes the head (the session's key must be on disk), then every 32nd.
    assert_eq!(checkpoints, [1, 1 + HEAD_EVERY, 1 + 2 * HEAD_EVERY]);
}

#[tokio::test]
async fn the_head_is_rewritten_once_256_kib_lie_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    let mut version = store
        .append(&key(), 0, &turn_events(1, "first", None))
        .await
        .expect("append");
    // Appends of about 100 KiB each: the third one brings the log past the head over 256 KiB,
    // long before 32 appends.
    let mut seq = 3;
    for expected_head in [1, 1, 4, 4, 4, 7] {
        let event = Event::new(
            seq,
            Author::Tool,
            1_000 + seq,
            EventKind::Note {
                text: "x".repeat(100 * 1024),
            },
        );
        version = store
            .append(&key(), version, &[event])
            .await
            .expect("append");
        seq += 1;
        store.settle_files().await.expect("settle");
        let (head_version, covered) = head(dir.path());
        assert_eq!(head_version, expected_head, "after version {version}");
        assert!(log_len(dir.path()) - covered < HEAD_EVERY_BYTES);
    }
    drop(store);
    let store = FileStore::open(dir.path()).expect("reopen");
    let record = store
        .load(&key(), 0)
        .await
        .expect("load")
        .record
        .expect("head");
    assert_eq!((record.version, record.next_seq), (version, seq));
    let events = store.read_events(&key(), 1, 100).await.expect("read");
    assert_eq!(events.len() as u64, seq - 1, "every append is read back");
}
