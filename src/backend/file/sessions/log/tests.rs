//! Reading logs back after crashes and damage.

use super::*;
use crate::store::conformance::turn_events;

fn key() -> SessionKey {
    SessionKey::new("u", "s").unwrap()
}

/// The state of a session with no head, before its tail is folded.
fn headless() -> Current {
    Current {
        record: None,
        log_end: 0,
        log_len: 0,
        head_end: 0,
        unheaded: 0,
        has_head: false,
        damage: None,
    }
}

fn fold(tail: &[u8]) -> Result<Current, StoreError> {
    let mut current = headless();
    fold_tail(&mut current, &key(), Path::new("log"), tail).map(|()| current)
}

/// Two complete appends (versions 1 and 2), as the store writes them.
fn two_appends() -> Vec<u8> {
    let mut tail = line::encode_append(&turn_events(1, "a", None), 1).unwrap();
    tail.extend(line::encode_append(&turn_events(3, "b", None), 2).unwrap());
    tail
}

#[test]
fn complete_appends_fold_and_an_unfinished_one_is_dropped_whole() {
    let mut tail = two_appends();
    let valid = tail.len() as u64;
    let third = line::encode_append(&turn_events(5, "c", None), 3).unwrap();
    // Torn after the third append's first line: that line is complete, but unmarked.
    let first_line = third.iter().position(|&b| b == b'\n').unwrap() + 1;
    tail.extend_from_slice(&third[..first_line + 10]);
    let current = fold(&tail).unwrap();
    let record = current.record.unwrap();
    assert_eq!((record.version, record.next_seq), (2, 5));
    assert_eq!((current.log_end, current.unheaded), (valid, 2));
}

#[test]
fn unmarked_lines_of_the_old_format_past_the_head_are_dropped() {
    let mut tail = Vec::new();
    for event in turn_events(1, "old", None) {
        tail.extend(serde_json::to_vec(&event).unwrap());
        tail.push(b'\n');
    }
    let current = fold(&tail).unwrap();
    assert!(current.record.is_none());
    assert_eq!(current.log_end, 0);
}

#[test]
fn an_unreadable_line_before_a_marked_one_is_corruption() {
    let mut tail = line::encode_append(&turn_events(1, "a", None), 1).unwrap();
    tail.extend_from_slice(b"\0\0\0\n");
    tail.extend(line::encode_append(&turn_events(3, "b", None), 2).unwrap());
    assert!(matches!(fold(&tail), Err(StoreError::Corrupt { .. })));
    // The same garbage last, followed only by a torn marked line, is a torn write.
    let mut tail = two_appends();
    tail.extend_from_slice(b"\0\0\0\n{\"_v\":3,\"seq\"");
    assert_eq!(fold(&tail).unwrap().record.unwrap().version, 2);
}

#[test]
fn damage_to_the_last_marked_line_is_corruption_not_a_torn_append() {
    let mut tail = two_appends();
    let last_line = tail[..tail.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    // The marker survives, the JSON after it does not.
    let mut broken = tail.clone();
    let at = broken.len() - 3;
    broken[at] = b'\0';
    assert!(matches!(fold(&broken), Err(StoreError::Corrupt { .. })));
    // The JSON survives, a byte of the event does not: only the CRC can tell.
    // The second character of the event's id (`"id":"…`), a hex digit.
    let at = last_line
        + tail[last_line..]
            .windows(4)
            .position(|w| w == b"\"id\"")
            .unwrap()
        + 7;
    tail[at] = if tail[at] == b'a' { b'b' } else { b'a' };
    assert!(line::decode(&tail[last_line..tail.len() - 1]).is_ok());
    let error = fold(&tail).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("does not match the length and CRC"),
        "{error}"
    );
}

#[test]
fn appends_of_the_first_marked_format_fold_without_a_check() {
    // `{"_v":N,` alone, as the first build with markers wrote them.
    let mut tail = Vec::new();
    for (version, seq) in [(1u64, 1u64), (2, 3)] {
        let events = turn_events(seq, "v1", None);
        tail.extend(serde_json::to_vec(&events[0]).unwrap());
        tail.push(b'\n');
        tail.extend(format!("{{\"_v\":{version},").bytes());
        tail.extend(&serde_json::to_vec(&events[1]).unwrap()[1..]);
        tail.push(b'\n');
    }
    tail.extend(line::encode_append(&turn_events(5, "v2", None), 3).unwrap());
    let current = fold(&tail).unwrap();
    let record = current.record.unwrap();
    assert_eq!((record.version, record.next_seq), (3, 7));
    assert_eq!(current.log_end, tail.len() as u64);
}

#[test]
fn markers_must_count_up_from_the_head() {
    let mut tail = line::encode_append(&turn_events(1, "a", None), 1).unwrap();
    tail.extend(line::encode_append(&turn_events(3, "b", None), 3).unwrap());
    assert!(matches!(fold(&tail), Err(StoreError::Corrupt { .. })));
    let skipped_seq = line::encode_append(&turn_events(2, "a", None), 1).unwrap();
    assert!(matches!(
        fold(&skipped_seq),
        Err(StoreError::Corrupt { .. })
    ));
}

#[test]
fn the_tail_start_is_found_across_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    // Lines of varied sizes, several larger than a block, so boundaries fall everywhere.
    let sizes = [10usize, 70_000, 5, 64 * 1024 - 1, 64 * 1024, 3, 200_000, 1];
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for size in sizes {
        starts.push(bytes.len() as u64);
        bytes.extend(std::iter::repeat_n(b'x', size));
        bytes.push(b'\n');
    }
    std::fs::write(&path, &bytes).unwrap();
    let end = bytes.len() as u64;
    for window in 1..=sizes.len() + 2 {
        let expected = starts.len().checked_sub(window).map_or(0, |i| starts[i]);
        assert_eq!(
            tail_start(&path, end, window).unwrap(),
            expected,
            "window {window}"
        );
    }
}

/// A session folder in a fresh root holding `record` as its head (covering `log_bytes`) and
/// `log`. Heads like these are damaged ones: the store never writes them.
fn on_disk(
    record: &SessionRecord,
    log_bytes: u64,
    log: &[u8],
) -> (tempfile::TempDir, SessionPaths) {
    let root = tempfile::tempdir().unwrap();
    let paths = SessionPaths::of(root.path(), &key());
    std::fs::create_dir_all(&paths.dir).unwrap();
    std::fs::write(&paths.head, encode_head(record, log_bytes).unwrap()).unwrap();
    std::fs::write(&paths.log, log).unwrap();
    (root, paths)
}

fn head(version: u64, next_seq: Seq) -> SessionRecord {
    let mut record = SessionRecord::new(key(), 1);
    (record.version, record.next_seq) = (version, next_seq);
    record
}

#[test]
fn a_head_whose_next_seq_is_zero_is_corrupt_not_a_panic() {
    let log = line::encode_append(&turn_events(1, "a", None), 1).unwrap();
    let (_root, paths) = on_disk(&head(1, 0), log.len() as u64, &log);
    let current = read_current(&paths, &key()).unwrap();
    let loaded = read_tail(&paths, &key(), current.log_end, 0, 4);
    assert!(
        matches!(loaded, Err(StoreError::Corrupt { .. })),
        "{loaded:?}"
    );
}

#[test]
fn a_head_that_promises_events_over_an_empty_log_is_corrupt() {
    let (_root, paths) = on_disk(&head(1, 3), 0, b"");
    let current = read_current(&paths, &key()).unwrap();
    let loaded = read_tail(&paths, &key(), current.log_end, 3, 4);
    assert!(
        matches!(loaded, Err(StoreError::Corrupt { .. })),
        "{loaded:?}"
    );
    let read = scan(&paths, &key(), current.log_end, 3, 1, usize::MAX);
    assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
}

#[test]
fn reading_a_log_shorter_than_its_head_promises_is_corrupt() {
    let log = two_appends();
    let (_root, paths) = on_disk(&head(2, 9), log.len() as u64, &log);
    let current = read_current(&paths, &key()).unwrap();
    let read = scan(&paths, &key(), current.log_end, 9, 1, usize::MAX);
    assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
    let whole = scan(&paths, &key(), current.log_end, 5, 1, usize::MAX).unwrap();
    assert_eq!(
        whole.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

#[test]
fn a_log_bytes_no_file_offset_can_hold_is_corrupt_not_an_io_error() {
    let (_root, paths) = on_disk(&head(0, 1), u64::MAX, b"");
    let read = read_current(&paths, &key());
    assert!(matches!(read, Err(StoreError::Corrupt { .. })), "{read:?}");
}
