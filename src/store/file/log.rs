//! Reading a session's files back: the head, the log, and the consistent view of the two after
//! a crash.
//!
//! The log is the source of truth. The head records how many bytes of the log it covers
//! (`log_bytes`); whatever lies past that was written by an append that never returned `Ok`:
//! complete events there are folded onto the head again, and the first unreadable or unfinished
//! line ends the valid log (the next append cuts it off). Inside the covered part every byte was
//! acknowledged, so anything unreadable there is corruption and is reported, never skipped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use super::fsio::{io_error, len_or_zero, read_optional};
use super::layout::SessionPaths;
use crate::key::SessionKey;
use crate::state::{check_schema, Event, Seq, SessionRecord};
use crate::store::StoreError;

/// The field of `head.json` (beside the record's own) that says how much of the log it covers.
const LOG_BYTES_FIELD: &str = "log_bytes";

/// How much of the log a windowed load reads per step while looking for line starts backwards.
const TAIL_BLOCK: u64 = 64 * 1024;

/// A session as its files say it is now.
#[derive(Debug)]
pub(super) struct Current {
    /// The head with any unheaded complete events folded in; `None` if the session has none.
    pub record: Option<SessionRecord>,
    /// Where the valid log ends.
    pub log_end: u64,
    /// The log file's length; bytes past `log_end` are an unacknowledged torn write.
    pub file_len: u64,
}

/// The error for unreadable stored data of `key`, naming the file.
pub(super) fn corrupt(key: &SessionKey, path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        detail: format!("{}: {detail}", path.display()),
    }
}

/// Serialises a head: the record plus the log length it covers.
pub(super) fn encode_head(record: &SessionRecord, log_bytes: u64) -> Result<Vec<u8>, StoreError> {
    let mut value = serde_json::to_value(record).map_err(|e| StoreError::Corrupt {
        key: record.key.to_string(),
        detail: format!("the head cannot be serialised: {e}"),
    })?;
    if let Some(object) = value.as_object_mut() {
        object.insert(LOG_BYTES_FIELD.to_owned(), Value::from(log_bytes));
    }
    Ok(value.to_string().into_bytes())
}

/// Reads a head, refusing a newer schema before anything else and a head of another session.
fn decode_head(
    bytes: &[u8],
    key: &SessionKey,
    path: &Path,
) -> Result<(SessionRecord, u64), StoreError> {
    let mut value: Value = serde_json::from_slice(bytes).map_err(|e| corrupt(key, path, e))?;
    check_schema(&value).map_err(|source| StoreError::Schema {
        key: key.clone(),
        source,
    })?;
    let log_bytes = value
        .as_object_mut()
        .and_then(|o| o.remove(LOG_BYTES_FIELD))
        .and_then(|v| v.as_u64())
        .ok_or_else(|| corrupt(key, path, "no `log_bytes` field"))?;
    let record: SessionRecord = serde_json::from_value(value).map_err(|e| corrupt(key, path, e))?;
    if record.key != *key {
        return Err(corrupt(
            key,
            path,
            format!("the head belongs to session {}", record.key),
        ));
    }
    Ok((record, log_bytes))
}

/// The key and last update time stored in a head, read without reconciling: for folders whose
/// name does not decode (hashed names) and for `gc`'s scan.
pub(super) fn stored_meta(paths: &SessionPaths) -> Option<(SessionKey, u64)> {
    let bytes = std::fs::read(&paths.head).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    let key = value.get("key")?.as_str()?.parse().ok()?;
    Some((key, value.get("updated_ms")?.as_u64()?))
}

/// The key stored in a head (see [`stored_meta`]).
pub(super) fn stored_key(paths: &SessionPaths) -> Option<SessionKey> {
    stored_meta(paths).map(|(key, _)| key)
}

/// Reads the head and reconciles it with the log (see the module docs).
pub(super) fn read_current(paths: &SessionPaths, key: &SessionKey) -> Result<Current, StoreError> {
    let head = read_optional(&paths.head)?
        .map(|bytes| decode_head(&bytes, key, &paths.head))
        .transpose()?;
    let (mut record, head_end) = match head {
        Some((record, end)) => (Some(record), end),
        None => (None, 0),
    };
    let file_len = len_or_zero(&paths.log)?;
    if file_len < head_end {
        return Err(corrupt(
            key,
            &paths.log,
            format!("the log is {file_len} bytes but its head covers {head_end}; acknowledged events are missing"),
        ));
    }
    if file_len == head_end {
        return Ok(Current {
            record,
            log_end: head_end,
            file_len,
        });
    }
    let tail = read_range(&paths.log, head_end, file_len)?;
    let (events, valid) = unheaded_events(&tail);
    if !events.is_empty() {
        let mut folded = record.unwrap_or_else(|| SessionRecord::new(key.clone(), events[0].at_ms));
        if events[0].seq != folded.next_seq || !is_dense(&events) {
            return Err(corrupt(
                key,
                &paths.log,
                format!(
                    "events past byte {head_end} do not continue the log at seq {}",
                    folded.next_seq
                ),
            ));
        }
        for event in &events {
            folded.apply(event);
        }
        // At most one append can be unheaded: every append reconciles before it writes.
        folded.version += 1;
        record = Some(folded);
    }
    if valid < tail.len() {
        tracing::debug!(session = %key, bytes = tail.len() - valid, "ignoring a torn log tail");
    }
    Ok(Current {
        record,
        log_end: head_end + valid as u64,
        file_len,
    })
}

/// The complete, readable events at the start of an unheaded tail, and how many bytes they take.
fn unheaded_events(tail: &[u8]) -> (Vec<Event>, usize) {
    let mut events = Vec::new();
    let mut pos = 0;
    while let Some(nl) = tail[pos..].iter().position(|&b| b == b'\n') {
        match serde_json::from_slice::<Event>(&tail[pos..pos + nl]) {
            Ok(event) => events.push(event),
            Err(_) => break,
        }
        pos += nl + 1;
    }
    (events, pos)
}

fn is_dense(events: &[Event]) -> bool {
    events.windows(2).all(|w| w[1].seq == w[0].seq + 1)
}

/// Reads bytes `from..to` of a file.
fn read_range(path: &Path, from: u64, to: u64) -> Result<Vec<u8>, StoreError> {
    let mut file = File::open(path).map_err(io_error("open", path))?;
    file.seek(SeekFrom::Start(from))
        .map_err(io_error("seek", path))?;
    let len = usize::try_from(to - from).map_err(|_| StoreError::Io {
        op: "read",
        path: path.to_path_buf(),
        source: std::io::Error::other("range larger than memory"),
    })?;
    let mut buf = vec![0; len];
    file.read_exact(&mut buf).map_err(io_error("read", path))?;
    Ok(buf)
}

/// Reads the newest `window` events of a log whose valid part ends at `end`, reading backwards
/// from the end so that the cost depends on the window, not on the length of the log.
pub(super) fn read_tail(
    paths: &SessionPaths,
    key: &SessionKey,
    end: u64,
    next_seq: Seq,
    window: usize,
) -> Result<Vec<Event>, StoreError> {
    if window == 0 || end == 0 {
        return Ok(Vec::new());
    }
    let start = tail_start(&paths.log, end, window)?;
    let bytes = read_range(&paths.log, start, end)?;
    if bytes.last() != Some(&b'\n') {
        return Err(corrupt(
            key,
            &paths.log,
            format!("no line ends at byte {end}"),
        ));
    }
    let mut events = Vec::with_capacity(window.min(1024));
    let mut offset = start;
    for line in bytes[..bytes.len() - 1].split(|&b| b == b'\n') {
        let event: Event = serde_json::from_slice(line).map_err(|e| {
            corrupt(
                key,
                &paths.log,
                format!("unreadable event at byte {offset}: {e}"),
            )
        })?;
        offset += line.len() as u64 + 1;
        events.push(event);
    }
    let first_ok = start > 0 || events.first().is_some_and(|e| e.seq == 1);
    let last_ok = events.last().is_some_and(|e| e.seq + 1 == next_seq);
    if !first_ok || !last_ok || !is_dense(&events) {
        return Err(corrupt(
            key,
            &paths.log,
            format!(
                "the newest events do not end at seq {} densely",
                next_seq - 1
            ),
        ));
    }
    Ok(events)
}

/// Where the newest `window` lines before `end` begin.
fn tail_start(path: &Path, end: u64, window: usize) -> Result<u64, StoreError> {
    let mut file = File::open(path).map_err(io_error("open", path))?;
    let mut pos = end;
    let mut newlines = 0usize;
    let mut buf = Vec::new();
    while pos > 0 {
        let block_start = pos.saturating_sub(TAIL_BLOCK);
        // The block is at most TAIL_BLOCK bytes, which fits in memory on every platform.
        buf.resize((pos - block_start) as usize, 0);
        file.seek(SeekFrom::Start(block_start))
            .map_err(io_error("seek", path))?;
        file.read_exact(&mut buf).map_err(io_error("read", path))?;
        for (i, &byte) in buf.iter().enumerate().rev() {
            // The newline that ends the last line is the first counted, so the window starts
            // right after the (window + 1)-th newline from the end.
            if byte == b'\n' {
                newlines += 1;
                if newlines > window {
                    return Ok(block_start + i as u64 + 1);
                }
            }
        }
        pos = block_start;
    }
    Ok(0)
}

/// Only the sequence number of an event: parsing skips the rest without building it.
#[derive(serde::Deserialize)]
struct SeqOnly {
    seq: Seq,
}

/// Reads at most `limit` events with `seq >= from` from the valid log ending at `end`, scanning
/// from the start.
pub(super) fn scan(
    paths: &SessionPaths,
    key: &SessionKey,
    end: u64,
    from: Seq,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    if limit == 0 || end == 0 {
        return Ok(events);
    }
    let file = File::open(&paths.log).map_err(io_error("open", &paths.log))?;
    let mut reader = BufReader::new(file.take(end));
    let mut line = Vec::new();
    let mut offset = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(io_error("read", &paths.log))?;
        if read == 0 {
            return Ok(events);
        }
        if line.last() != Some(&b'\n') {
            return Err(corrupt(
                key,
                &paths.log,
                format!("unfinished line at byte {offset}"),
            ));
        }
        let text = &line[..line.len() - 1];
        let bad = |e: serde_json::Error| {
            corrupt(
                key,
                &paths.log,
                format!("unreadable event at byte {offset}: {e}"),
            )
        };
        if serde_json::from_slice::<SeqOnly>(text).map_err(bad)?.seq >= from {
            events.push(serde_json::from_slice(text).map_err(bad)?);
            if events.len() == limit {
                return Ok(events);
            }
        }
        offset += read as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::turn_events;

    fn lines(events: &[Event]) -> Vec<u8> {
        let mut out = Vec::new();
        for event in events {
            out.extend(serde_json::to_vec(event).unwrap());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn an_unheaded_tail_keeps_its_readable_prefix_only() {
        let events = turn_events(1, "a", None);
        let mut tail = lines(&events);
        let valid = tail.len();
        assert_eq!(unheaded_events(&tail), (events.clone(), valid));
        tail.extend_from_slice(b"{\"seq\":3,\"id\"");
        assert_eq!(unheaded_events(&tail), (events.clone(), valid));
        let mut garbled = lines(&events[..1]);
        garbled.extend_from_slice(b"\0\0\n");
        garbled.extend(lines(&events[1..]));
        assert_eq!(unheaded_events(&garbled).0, events[..1].to_vec());
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
}
