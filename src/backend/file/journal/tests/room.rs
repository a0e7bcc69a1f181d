//! The journal's segments grow ahead of their batches with zeroed room (see `threads.rs`):
//! what the committer writes, and what replay makes of room a crash left.

use super::*;
use crate::backend::file::journal::format::read_segment;
use crate::backend::file::journal::threads::ROOM_BYTES;

#[test]
fn a_crash_left_segments_with_zeroed_room_and_every_one_replays_in_full() {
    let root = tempfile::tempdir().unwrap();
    leave_segment_with_room(root.path(), 1, &[&[append("a/log", 0, b"one\n")]], 100_000);
    leave_segment_with_room(root.path(), 2, &[&[append("a/log", 4, b"two\n")]], 5);
    leave_segment_with_room(root.path(), 3, &[&[append("a/log", 8, b"three\n")]], 0);
    drop(Journal::open(root.path()).unwrap());
    assert_eq!(
        fs::read(root.path().join("a/log")).unwrap(),
        b"one\ntwo\nthree\n"
    );
    assert_eq!(segment_count(root.path()), 0);
}

#[tokio::test]
async fn the_committer_writes_its_batches_over_zeroed_room_that_reads_as_no_damage() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    let mut expected = Vec::new();
    for i in 0..3 {
        let entry = write(root.path(), "a/log", format!("append {i}\n").as_bytes());
        expected.push(entry.clone());
        journal.commit(entry).await.unwrap();
    }
    let segment = root.path().join(JOURNAL_DIR).join("0000000000000001.wal");
    let bytes = fs::read(&segment).unwrap();
    assert_eq!(bytes.len() as u64 % ROOM_BYTES, 0, "{} bytes", bytes.len());
    let read = read_segment(&bytes, false).unwrap();
    assert_eq!(read.entries, expected);
    assert!(!read.unfinished);
    assert!(
        read.valid_len < bytes.len() as u64,
        "room after the batches"
    );
}

#[tokio::test]
async fn every_kind_of_entry_is_written_as_its_header_line_then_its_bytes() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    // Written behind (the session's log lines and head), as every append of a session is.
    let behind = vec![
        append("users/u/sessions/s/log.jsonl", 0, b"{\"n\":1}\n"),
        Entry::Replace {
            path: "users/u/sessions/s/head.json".into(),
            bytes: b"{\"head\":1}".to_vec(),
        },
    ];
    let answers = journal.commit_behind(behind.clone()).await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    // Committed with their files: a replacement the journal writes, a removal already made.
    let replaced = Entry::Replace {
        path: "app.json".into(),
        bytes: b"{\"app\":1}".to_vec(),
    };
    journal.commit(replaced.clone()).await.unwrap();
    let removed = Entry::Remove {
        path: "users/gone".into(),
    };
    journal.commit(removed.clone()).await.unwrap();
    let appended = write(root.path(), "a/log", b"plain\n");
    journal.commit(appended.clone()).await.unwrap();
    let segment = root.path().join(JOURNAL_DIR).join("0000000000000001.wal");
    let read = read_segment(&fs::read(&segment).unwrap(), false).unwrap();
    let mut expected = behind;
    expected.extend([replaced, removed, appended]);
    assert_eq!(read.entries, expected);
    assert!(!read.unfinished);
}

#[tokio::test]
async fn batches_larger_than_the_room_grow_it_as_far_as_they_need() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    let mut expected = Vec::new();
    // Each about 0.6 of a room step: the second starts over zeros and runs past them.
    let big = vec![b'x'; (ROOM_BYTES as usize) * 3 / 5];
    for _ in 0..3 {
        let entry = write(root.path(), "a/log", &big);
        expected.push(entry.clone());
        journal.commit(entry).await.unwrap();
    }
    let segment = root.path().join(JOURNAL_DIR).join("0000000000000001.wal");
    let bytes = fs::read(&segment).unwrap();
    assert_eq!(bytes.len() as u64 % ROOM_BYTES, 0, "{} bytes", bytes.len());
    assert!(
        bytes.len() as u64 >= 2 * ROOM_BYTES,
        "{} bytes",
        bytes.len()
    );
    let read = read_segment(&bytes, false).unwrap();
    assert_eq!(read.entries, expected);
    assert!(!read.unfinished);
}

#[test]
fn a_closed_segment_with_room_then_a_torn_batch_is_corrupt() {
    let root = tempfile::tempdir().unwrap();
    leave_segment_with_room(root.path(), 1, &[&[append("a/log", 0, b"one\n")]], 0);
    let dir = root.path().join(JOURNAL_DIR);
    let first = dir.join("0000000000000001.wal");
    let mut bytes = fs::read(&first).unwrap();
    // A batch's frame with nothing of its payload, then room: only a crash leaves that, and
    // only in the newest segment.
    bytes.extend_from_slice(b"TJB1\x10\0\0\0\0\0\0\0");
    bytes.resize(bytes.len() + 1000, 0);
    fs::write(&first, bytes).unwrap();
    leave_segment(root.path(), 2, &[&[append("a/log", 4, b"two\n")]]);
    match Journal::open(root.path()) {
        Err(StoreError::Corrupt { detail, .. }) => {
            assert!(detail.contains("a newer segment follows"), "{detail}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(segment_count(root.path()), 2, "nothing was thrown away");
}
