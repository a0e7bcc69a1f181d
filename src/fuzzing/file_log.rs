//! The file store's recovery of a session from arbitrary files: a recovered session or
//! `StoreError::Corrupt` (or `Schema` for a newer head), never a panic, and never a history
//! shorter than its head promises.

use serde_json::Value;

use crate::backend::file::probe;
use crate::key::SessionKey;
use crate::state::{Author, Event, EventKind, SessionRecord};
use crate::store::StoreError;

/// The bytes of one session's files; `None` when the file does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFiles {
    /// `head.json`.
    pub head: Option<Vec<u8>>,
    /// `log.jsonl`.
    pub log: Option<Vec<u8>>,
}

/// The key every recovered session is stored under.
fn key() -> SessionKey {
    SessionKey::new("fuzz", "session").expect("a valid key")
}

/// The files of a valid session of `appends` appends of `per_append` events each, its head
/// written after the first `headed` appends (none when 0). Deterministic, so that a fuzzer can
/// start from it.
pub fn valid_session(appends: u64, per_append: u64, headed: u64) -> LogFiles {
    let mut record = SessionRecord::new(key(), 1);
    let mut log = Vec::new();
    let mut head = None;
    for append in 1..=appends {
        let events: Vec<Event> = (0..per_append.max(1))
            .map(|i| {
                let seq = record.next_seq + i;
                let mut event = Event::new(
                    seq,
                    Author::User,
                    seq * 10,
                    EventKind::UserInput {
                        text: format!("message {seq}"),
                        disposition: Default::default(),
                    },
                );
                event.id = uuid::Uuid::from_u128(u128::from(seq));
                event
            })
            .collect();
        log.extend(probe::encode_append(&events, append));
        for event in &events {
            record.apply(event);
        }
        record.version = append;
        if append == headed {
            head = Some(probe::encode_head(&record, log.len() as u64));
        }
    }
    LogFiles {
        head,
        log: Some(log),
    }
}

/// What a head's bytes promise: its version and next sequence number, when it has them.
fn promised(head: Option<&[u8]>) -> Option<(u64, u64)> {
    let value: Value = serde_json::from_slice(head?).ok()?;
    Some((
        value.get("version")?.as_u64()?,
        value.get("next_seq")?.as_u64()?,
    ))
}

/// Writes `files` as a session's files in a fresh root and recovers the session, loading a
/// window of `window` events.
pub fn check_log_recovery(files: &LogFiles, window: usize) {
    let root = tempfile::tempdir().expect("a temporary folder");
    let key = key();
    let (dir, head_path, log_path) = probe::session_files(root.path(), &key);
    std::fs::create_dir_all(&dir).expect("the session folder");
    if let Some(head) = &files.head {
        std::fs::write(&head_path, head).expect("write the head");
    }
    if let Some(log) = &files.log {
        std::fs::write(&log_path, log).expect("write the log");
    }
    let first = probe::recover(root.path(), &key, window);
    match &first {
        Ok(recovered) => check_recovered(root.path(), files, recovered, window),
        Err(StoreError::Corrupt { key: named, .. }) => assert_eq!(named, &key.to_string()),
        Err(StoreError::Schema { .. }) => {}
        Err(other) => panic!("recovery failed with neither Corrupt nor Schema: {other}"),
    }
    let again = probe::recover(root.path(), &key, window);
    assert_eq!(
        format!("{first:?}"),
        format!("{again:?}"),
        "recovery read the same files twice and disagreed"
    );
}

fn check_recovered(
    root: &std::path::Path,
    files: &LogFiles,
    recovered: &probe::Recovered,
    window: usize,
) {
    let key = key();
    let Some(record) = &recovered.record else {
        assert!(
            files.head.is_none(),
            "a head was there, the session loaded as new"
        );
        assert!(recovered.window.is_empty());
        return;
    };
    if let Some((version, next_seq)) = promised(files.head.as_deref()) {
        assert!(
            record.version >= version,
            "recovered an older version than the head's"
        );
        assert!(
            record.next_seq >= next_seq,
            "recovered fewer events than the head's"
        );
    }
    let stored = record.next_seq.saturating_sub(1);
    let expected = stored.min(window as u64);
    assert_eq!(recovered.window.len() as u64, expected, "a short window");
    let seqs: Vec<u64> = recovered.window.iter().map(|e| e.seq).collect();
    let from = stored - expected + 1;
    assert!(
        seqs.iter().copied().eq(from..=stored),
        "window seqs {seqs:?}"
    );
    match probe::read_all(root, &key) {
        Ok(all) => {
            let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
            assert!(
                seqs.iter().copied().eq(1..=stored),
                "reading the whole log gave seqs {seqs:?}, the head promises 1..={stored}"
            );
        }
        Err(StoreError::Corrupt { .. }) => {}
        Err(other) => panic!("reading the log failed with neither Corrupt nor Schema: {other}"),
    }
}
