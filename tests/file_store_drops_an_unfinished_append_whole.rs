//! Property: a crash in the middle of a multi-event append never half-applies it. Its complete
//! first lines carry no commit marker, so the reopened session is exactly as before the append —
//! version, state (even the deltas of the complete lines) and events — and the next append cuts
//! the leftovers off and continues the log cleanly.

mod support;

use std::io::Write;
use std::path::Path;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::{Author, Event, EventKind, StateDelta};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::find_one;

fn key() -> SessionKey {
    SessionKey::new("dave", "s").expect("valid key")
}

/// A store at `root` holding two turns (seq 1–4, state `n` = 2); returns the version.
async fn two_turns(root: &Path) -> u64 {
    let store = FileStore::open(root).expect("open");
    let mut version = 0;
    for (t, seq) in [1u64, 3].into_iter().enumerate() {
        let delta: StateDelta = [("n".to_owned(), json!(t + 1))].into();
        version = store
            .append(&key(), version, &turn_events(seq, "turn", Some(delta)))
            .await
            .expect("append");
    }
    version
}

/// Three events from seq 5, each changing state, as one append would write them (the commit
/// marker aside, which only the last line carries).
fn three_lines() -> Vec<Vec<u8>> {
    (5..8u64)
        .map(|seq| {
            let mut event = Event::new(
                seq,
                Author::System,
                9_000 + seq,
                EventKind::Note {
                    text: format!("note {seq}"),
                },
            );
            event.state_delta = Some([("n".to_owned(), json!(100 + seq))].into());
            let mut line = serde_json::to_vec(&event).expect("json");
            line.push(b'\n');
            line
        })
        .collect()
}

fn append_raw(root: &Path, bytes: &[u8]) {
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(find_one(root, "log.jsonl"))
        .expect("open log");
    log.write_all(bytes).expect("append raw bytes");
}

/// Reopens `root` and checks the session is exactly as after [`two_turns`], then that it goes on.
async fn assert_as_before(root: &Path, version: u64) {
    let store = FileStore::open(root).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load");
    let record = loaded.record.expect("head");
    assert_eq!(record.version, version);
    assert_eq!(record.next_seq, 5);
    assert_eq!(
        record.state["n"],
        json!(2),
        "no delta of the unfinished append"
    );
    assert_eq!(record.stats.events, 4);
    assert_eq!(loaded.events.len(), 4);
    assert_eq!(
        store.read_events(&key(), 1, 100).await.expect("read").len(),
        4
    );
    let log_path = find_one(root, "log.jsonl");
    let before = std::fs::read(&log_path).expect("read log");
    let next = store
        .append(&key(), version, &turn_events(5, "after", None))
        .await
        .expect("the append the crash interrupted can be made again");
    assert_eq!(next, version + 1);
    store.settle_files().await.expect("settle");
    assert_cut_is_kept(&log_path, &before);
    let events = store.read_events(&key(), 1, 100).await.expect("read");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=6).collect::<Vec<_>>());
    let text = std::fs::read_to_string(find_one(root, "log.jsonl")).expect("read log");
    assert_eq!(text.lines().count(), 6, "the leftovers were cut");
    assert!(!text.contains("note 5"));
}

/// Checks that the bytes the append cut off `before` (the log as it was) are kept, exactly, in
/// one `log.jsonl.cut-<offset>` beside the log, the offset being where the cut began.
fn assert_cut_is_kept(log_path: &Path, before: &[u8]) {
    let dir = log_path.parent().expect("the log's folder");
    let copies: Vec<_> = std::fs::read_dir(dir)
        .expect("list the session folder")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .filter(|name| name.starts_with("log.jsonl.cut-"))
        .collect();
    assert_eq!(copies.len(), 1, "one copy of the cut bytes: {copies:?}");
    let offset: usize = copies[0]["log.jsonl.cut-".len()..]
        .parse()
        .expect("the copy is named by its offset");
    let after = std::fs::read(log_path).expect("read log");
    assert_eq!(
        after[..offset],
        before[..offset],
        "the log up to the cut is unchanged"
    );
    assert_eq!(
        std::fs::read(dir.join(&copies[0])).expect("read the copy"),
        before[offset..],
        "the copy holds exactly the bytes cut"
    );
    assert!(offset < before.len());
}

#[tokio::test]
async fn torn_right_after_the_first_event_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    append_raw(dir.path(), &three_lines()[0]);
    assert_as_before(dir.path(), version).await;
}

#[tokio::test]
async fn torn_inside_the_second_event_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    let lines = three_lines();
    append_raw(dir.path(), &lines[0]);
    append_raw(dir.path(), &lines[1][..lines[1].len() / 2]);
    assert_as_before(dir.path(), version).await;
}

#[tokio::test]
async fn torn_inside_the_marked_last_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    let lines = three_lines();
    append_raw(dir.path(), &lines[0]);
    append_raw(dir.path(), &lines[1]);
    let marked = format!("{{\"_v\":{},", version + 1);
    let mut last = marked.into_bytes();
    last.extend_from_slice(&lines[2][1..lines[2].len() / 2]);
    append_raw(dir.path(), &last);
    assert_as_before(dir.path(), version).await;
}

#[tokio::test]
async fn the_running_store_notices_leftovers_too() {
    // Not a crash: the same process, after bytes appeared behind its back (as a failed
    // rollback would leave them). What it remembers is checked against the files before use.
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    let store = FileStore::open(dir.path()).expect("open");
    store.load(&key(), 1).await.expect("load");
    append_raw(dir.path(), &three_lines()[0]);
    let next = store
        .append(&key(), version, &turn_events(5, "after", None))
        .await
        .expect("append");
    assert_eq!(next, version + 1);
    let seqs: Vec<u64> = store
        .read_events(&key(), 1, 100)
        .await
        .expect("read")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=6).collect::<Vec<_>>());
}

#[tokio::test]
async fn an_append_that_cannot_keep_a_copy_cuts_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let version = two_turns(dir.path()).await;
    let log_path = find_one(dir.path(), "log.jsonl");
    let valid = std::fs::metadata(&log_path).expect("stat").len();
    append_raw(dir.path(), &three_lines()[0]);
    let before = std::fs::read(&log_path).expect("read log");
    // Every name a copy of this cut could take is taken (by folders, which no file can
    // replace), so the copy cannot be made.
    let session = log_path.parent().expect("the log's folder");
    std::fs::create_dir(session.join(format!("log.jsonl.cut-{valid}"))).expect("mkdir");
    for n in 1..100 {
        std::fs::create_dir(session.join(format!("log.jsonl.cut-{valid}.{n}"))).expect("mkdir");
    }
    let store = FileStore::open(dir.path()).expect("reopen");
    let refused = store
        .append(&key(), version, &turn_events(5, "after", None))
        .await;
    assert!(
        matches!(refused, Err(turnstile::StoreError::Io { .. })),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read(&log_path).expect("read log"),
        before,
        "nothing was cut or written"
    );
}
