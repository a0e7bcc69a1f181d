use std::fs;
use std::path::Path;

use std::fs::OpenOptions;
use std::io::Write;

use super::format::{append, segment, SEGMENT_HEADER};
use super::*;

/// Writes `bytes` at the end of `root/path` as a store would before committing, and returns the
/// entry that describes it.
fn write(root: &Path, path: &str, bytes: &[u8]) -> Entry {
    let full = root.join(path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&full)
        .unwrap();
    let at = file.metadata().unwrap().len();
    file.write_all(bytes).unwrap();
    append(path, at, bytes)
}

/// Leaves a segment as a crash would: `batches` written and flushed, no checkpoint.
fn leave_segment(root: &Path, number: u64, batches: &[&[Entry]]) {
    leave_segment_with_room(root, number, batches, 0);
}

/// [`leave_segment`] with `room` zeros after the batches, as the committer leaves them.
fn leave_segment_with_room(root: &Path, number: u64, batches: &[&[Entry]], room: usize) {
    let dir = root.join(JOURNAL_DIR);
    fs::create_dir_all(&dir).unwrap();
    let mut bytes = segment(batches);
    bytes.resize(bytes.len() + room, 0);
    fs::write(dir.join(format!("{number:016}.wal")), bytes).unwrap();
}

fn segment_count(root: &Path) -> usize {
    fs::read_dir(root.join(JOURNAL_DIR)).unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_flushes_and_a_clean_close_leaves_no_journal() {
    let root = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(root.path()).unwrap());
    let writers = 64;
    let rounds = 20;
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (journal, root) = (journal.clone(), root.path().to_owned());
            tokio::spawn(async move {
                for r in 0..rounds {
                    let path = format!("s{w}/log");
                    let entry = write(&root, &path, format!("{w}:{r}\n").as_bytes());
                    journal.commit(entry).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let flushes = journal.flushes();
    assert!(
        flushes < writers * rounds,
        "{flushes} flushes for {} commits: none was shared",
        writers * rounds
    );
    drop(Arc::into_inner(journal).expect("the last handle"));
    assert_eq!(segment_count(root.path()), 0, "a clean close checkpoints");
    for w in 0..writers {
        let text = fs::read_to_string(root.path().join(format!("s{w}/log"))).unwrap();
        let expected: String = (0..rounds).map(|r| format!("{w}:{r}\n")).collect();
        assert_eq!(text, expected);
    }
}

#[test]
fn a_crash_before_the_files_were_flushed_is_repaired_from_the_journal() {
    let root = tempfile::tempdir().unwrap();
    // The files lost their unflushed tails (or never reached the disk at all).
    fs::create_dir_all(root.path().join("a")).unwrap();
    fs::write(root.path().join("a/log"), b"one\n").unwrap();
    // A head renamed into place before its content reached the disk.
    fs::write(root.path().join("a/head"), b"").unwrap();
    leave_segment(
        root.path(),
        3,
        &[
            &[
                append("a/log", 0, b"one\n"),
                append("b/c/log", 0, b"first\n"),
            ],
            &[
                append("a/log", 4, b"two\n"),
                Entry::Replace {
                    path: "a/head".into(),
                    bytes: b"{\"covers\":8}".to_vec(),
                },
            ],
        ],
    );
    drop(Journal::open(root.path()).unwrap());
    assert_eq!(fs::read(root.path().join("a/log")).unwrap(), b"one\ntwo\n");
    assert_eq!(
        fs::read(root.path().join("a/head")).unwrap(),
        b"{\"covers\":8}"
    );
    assert_eq!(fs::read(root.path().join("b/c/log")).unwrap(), b"first\n");
    assert_eq!(segment_count(root.path()), 0);
}

#[test]
fn replay_cuts_what_the_journal_never_acknowledged_and_rewrites_a_torn_tail() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("a")).unwrap();
    // Acknowledged: "one\ntwo\n". The file holds a damaged second append.
    fs::write(root.path().join("a/log"), b"one\ntw\0").unwrap();
    leave_segment(
        root.path(),
        1,
        &[
            &[append("a/log", 0, b"one\n")],
            &[append("a/log", 4, b"two\n")],
        ],
    );
    drop(Journal::open(root.path()).unwrap());
    assert_eq!(fs::read(root.path().join("a/log")).unwrap(), b"one\ntwo\n");
}

#[test]
fn appends_to_a_folder_removed_later_are_not_brought_back() {
    let root = tempfile::tempdir().unwrap();
    leave_segment(
        root.path(),
        1,
        &[
            &[
                append("users/a/s/log", 0, b"gone\n"),
                Entry::Replace {
                    path: "users/a/s/head".into(),
                    bytes: b"{}".to_vec(),
                },
            ],
            &[Entry::Remove {
                path: "users/a".into(),
            }],
        ],
    );
    leave_segment(root.path(), 2, &[&[append("users/a/t/log", 0, b"new\n")]]);
    drop(Journal::open(root.path()).unwrap());
    assert!(!root.path().join("users/a/s").exists());
    assert_eq!(
        fs::read(root.path().join("users/a/t/log")).unwrap(),
        b"new\n"
    );
}

#[test]
fn a_file_missing_acknowledged_bytes_is_corrupt_and_the_journal_is_kept() {
    let root = tempfile::tempdir().unwrap();
    leave_segment(root.path(), 1, &[&[append("a/log", 10, b"late\n")]]);
    match Journal::open(root.path()) {
        Err(StoreError::Corrupt { detail, .. }) => {
            assert!(
                detail.contains("bytes acknowledged before it are missing"),
                "{detail}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(segment_count(root.path()), 1, "nothing was thrown away");
}

#[test]
fn a_newer_journal_is_refused_and_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(JOURNAL_DIR);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("0000000000000001.wal"),
        b"turnstile-journal 3\n...",
    )
    .unwrap();
    match Journal::open(root.path()) {
        Err(StoreError::NewerLayout { found: 3, .. }) => {}
        other => panic!("expected NewerLayout, got {other:?}"),
    }
    assert_eq!(
        fs::read(dir.join("0000000000000001.wal")).unwrap(),
        b"turnstile-journal 3\n..."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_segments_are_checkpointed_while_writes_go_on() {
    let root = tempfile::tempdir().unwrap();
    // Tiny segments: nearly every batch closes one.
    let journal = Journal::open_with(root.path(), 256).unwrap();
    let mut expected = Vec::new();
    for i in 0..300 {
        let line = format!("line {i} of a session's log\n");
        expected.extend_from_slice(line.as_bytes());
        journal
            .commit(write(root.path(), "s/log", line.as_bytes()))
            .await
            .unwrap();
        // The current one, one being checkpointed, one waiting, and the next made before the
        // hand-over waits.
        assert!(
            segment_count(root.path()) <= 4,
            "closed segments pile up instead of being checkpointed"
        );
    }
    drop(journal);
    assert_eq!(segment_count(root.path()), 0);
    assert_eq!(fs::read(root.path().join("s/log")).unwrap(), expected);
}

#[tokio::test]
async fn an_entry_naming_a_path_outside_the_root_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    let refused = journal.commit(append("../elsewhere", 0, b"x")).await;
    assert!(
        matches!(refused, Err(StoreError::InvalidRequest(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn entries_queued_together_are_answered_in_order_up_to_the_first_refused() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    let (dir, log) = ("users/u/sessions/s", "users/u/sessions/s/log.jsonl");
    let removal = || Entry::Remove { path: dir.into() };
    let answers = journal
        .commit_behind(vec![
            append(log, 0, b"a\n"),
            removal(),
            append(log, 2, b"b\n"),
        ])
        .await;
    assert_eq!(
        answers.len(),
        2,
        "nothing after the refused entry is answered"
    );
    assert!(answers[0].is_ok());
    let refused = answers[1].as_ref().unwrap_err().to_string();
    assert!(refused.contains("cannot be written behind"), "{refused}");
    journal.settle(&root.path().join(dir)).unwrap();
    assert_eq!(
        fs::read(root.path().join(log)).unwrap(),
        b"a\n",
        "nor queued"
    );
    // Refused first: nothing is queued at all.
    let answers = journal
        .commit_behind(vec![removal(), append(log, 2, b"b\n")])
        .await;
    assert_eq!(answers.len(), 1);
    assert!(answers[0].is_err());
    journal.settle(&root.path().join(dir)).unwrap();
    assert_eq!(fs::read(root.path().join(log)).unwrap(), b"a\n");
}

#[tokio::test]
async fn a_replacement_is_written_to_its_file_once_it_is_durable() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    journal
        .commit(Entry::Replace {
            path: "s/head.json".into(),
            bytes: b"{\"v\":2}".to_vec(),
        })
        .await
        .unwrap();
    // Written by the journal before the commit returned: a checkpoint can only flush it after.
    assert_eq!(
        fs::read(root.path().join("s/head.json")).unwrap(),
        b"{\"v\":2}"
    );
}

#[tokio::test]
async fn a_barrier_returns_once_every_earlier_entry_left_the_journal() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    journal
        .commit(write(root.path(), "users/a/s/log", b"one\n"))
        .await
        .unwrap();
    journal
        .commit(Entry::Remove {
            path: "users/a".into(),
        })
        .await
        .unwrap();
    journal.checkpoint().await.unwrap();
    // Only the new, empty segment is left: no replay can remove what is written from now on.
    let left: Vec<_> = fs::read_dir(root.path().join(JOURNAL_DIR))
        .unwrap()
        .map(|e| fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(left, [SEGMENT_HEADER.to_vec()]);
}

#[tokio::test]
async fn a_stopped_journal_refuses_writes_and_says_why() {
    let root = tempfile::tempdir().unwrap();
    let journal = Journal::open(root.path()).unwrap();
    journal.halt("the disk is gone".to_owned());
    let refused = journal.commit(append("a", 0, b"x")).await;
    match refused {
        Err(StoreError::Unavailable { detail, .. }) => {
            assert!(detail.contains("the disk is gone"), "{detail}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(journal.refusal().is_some());
}

/// Writes behind the journal: many writers commit appends and heads of their own sessions
/// while readers settle sessions and the journal checkpoints small segments. Every reader that
/// settled a session finds at least what was acknowledged before, every checkpoint leaves the
/// files holding what its segments covered, and at the end every file is exactly its appends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_behind_reach_their_files_before_any_reader_or_checkpoint_needs_them() {
    let root = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open_with(root.path(), 16 * 1024).unwrap());
    let sessions = 80;
    let rounds = 12;
    let line = |s: usize, r: usize| format!("{{\"s\":{s},\"r\":{r}}}\n").into_bytes();
    let tasks: Vec<_> = (0..sessions)
        .map(|s| {
            let (journal, root) = (journal.clone(), root.path().to_owned());
            tokio::spawn(async move {
                let dir = root.join(format!("users/u/sessions/s{s}"));
                let mut end = 0;
                for r in 0..rounds {
                    let bytes = line(s, r);
                    let entry = append(&format!("users/u/sessions/s{s}/log.jsonl"), end, &bytes);
                    for answer in journal.commit_behind(vec![entry]).await {
                        answer.unwrap();
                    }
                    end += bytes.len() as u64;
                    if r % 4 == 0 {
                        let head = Entry::Replace {
                            path: format!("users/u/sessions/s{s}/head.json").into(),
                            bytes: format!("{end}").into_bytes(),
                        };
                        for answer in journal.commit_behind(vec![head]).await {
                            answer.unwrap();
                        }
                    }
                    if r % 3 == 2 {
                        // A reader: what was acknowledged is in the file once it settled.
                        let (journal, dir) = (journal.clone(), dir.clone());
                        let len = tokio::task::spawn_blocking(move || {
                            journal.settle(&dir).unwrap();
                            fs::metadata(dir.join("log.jsonl")).unwrap().len()
                        })
                        .await
                        .unwrap();
                        assert!(
                            len >= end,
                            "session {s}: {len} bytes after {end} acknowledged"
                        );
                    }
                    if s == 0 && r % 4 == 3 {
                        // Every segment before it checkpointed: written, flushed, deleted.
                        journal.checkpoint().await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    journal.settle_all().unwrap();
    for s in 0..sessions {
        let dir = root.path().join(format!("users/u/sessions/s{s}"));
        let expected: Vec<u8> = (0..rounds).flat_map(|r| line(s, r)).collect();
        assert_eq!(
            fs::read(dir.join("log.jsonl")).unwrap(),
            expected,
            "session {s}"
        );
        let head: u64 = fs::read_to_string(dir.join("head.json"))
            .unwrap()
            .parse()
            .unwrap();
        // The newest head written: the one of the last round divisible by 4.
        let last = (0..rounds).filter(|r| r % 4 == 0).max().unwrap();
        let covered: usize = (0..=last).map(|r| line(s, r).len()).sum();
        assert_eq!(head, covered as u64, "session {s}");
    }
    drop(Arc::into_inner(journal).expect("the only reference"));
    assert_eq!(
        segment_count(root.path()),
        0,
        "a clean close leaves no journal"
    );
}

#[test]
fn a_header_line_is_its_fields_in_order_in_the_room_reserved_for_it() {
    let path = "users/u/sessions/s/log.jsonl";
    let header = encode_header(&append(path, 7, b"abc")).unwrap();
    assert_eq!(
        header,
        b"{\"op\":\"append\",\"path\":\"users/u/sessions/s/log.jsonl\",\"at\":7,\"len\":3}\n"
    );
    // Encoded without growing its buffer.
    assert_eq!(header.capacity(), HEADER_ROOM + path.len());
    // The longest one besides its path: both numbers at twenty digits (the length is one
    // digit here).
    let longest = encode_header(&append(path, u64::MAX, b"")).unwrap();
    let besides_path = longest.len() - path.len() + 19;
    assert!(
        besides_path <= HEADER_ROOM,
        "{besides_path} bytes besides the path"
    );
}

mod room;
