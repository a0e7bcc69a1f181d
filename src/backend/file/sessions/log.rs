//! Reading a session's files back: the head, the log, and the consistent view of the two after
//! a crash.
//!
//! The log is the source of truth. Each append ends with a line carrying a commit marker, the
//! session's version after it (see `line.rs`). The head records how many bytes of the log it
//! covers (`log_bytes`); it is rewritten only now and then, so the log past it holds up to
//! [`super::session::HEAD_EVERY`] acknowledged appends, which reads fold onto it, taking the
//! version from the last marker. Lines after the last marker belong to an append that never
//! completed: they are dropped (the next append cuts them off, keeping a copy), so a crash never
//! half-applies an append. An unreadable line *before* a marker, or an append whose bytes no
//! longer match the length and CRC-32 its marker records, is damage to an append that was
//! written whole: `Corrupt`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use super::fsio::{io_error, len_or_zero, read_optional};
use super::layout::SessionPaths;
use super::line;
use crate::key::SessionKey;
use crate::state::{check_schema, Event, Seq, SessionRecord};
use crate::store::StoreError;

/// The field of `head.json` (beside the record's own) that says how much of the log it covers.
const LOG_BYTES_FIELD: &str = "log_bytes";

/// How much of the log a windowed load reads per step while looking for line starts backwards.
const TAIL_BLOCK: u64 = 64 * 1024;

/// A session as its files say it is now.
#[derive(Debug, Clone)]
pub(super) struct Current {
    /// The head with the complete appends past it folded in; `None` if the session has none.
    pub record: Option<SessionRecord>,
    /// Where the valid log ends: right after the last complete append.
    pub log_end: u64,
    /// The log file's length; bytes past `log_end` are an unfinished append, never acknowledged.
    pub log_len: u64,
    /// How much of the log `head.json` covers.
    pub head_end: u64,
    /// How many complete appends lie past `head_end`.
    pub unheaded: u32,
    /// Whether the session has a `head.json` (on disk or owed to it by the journal).
    pub has_head: bool,
    /// What a read found missing from files this store wrote while it runs (acknowledged
    /// bytes): every later append and read of the session is refused with it.
    pub damage: Option<String>,
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
        // A file offset past i64::MAX cannot be sought to: that is damage, not an I/O error.
        .filter(|&bytes| i64::try_from(bytes).is_ok())
        .ok_or_else(|| corrupt(key, path, "no valid `log_bytes` field"))?;
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

/// The key stored in a head, read without reconciling: for folders whose name does not decode
/// (hashed names) and for `gc`'s scan.
pub(super) fn stored_key(paths: &SessionPaths) -> Option<SessionKey> {
    let bytes = std::fs::read(&paths.head).ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("key")?.as_str()?.parse().ok()
}

/// Reads the head and reconciles it with the log (see the module docs).
///
/// Takes no lock of its own: listings call it while appends may run. It reads the log from the
/// head's end to wherever the file ends at that moment, so an append cutting an unfinished tail
/// meanwhile can only make it see less of that tail, never fail.
pub(super) fn read_current(paths: &SessionPaths, key: &SessionKey) -> Result<Current, StoreError> {
    let (record, head_end) = match read_optional(&paths.head)? {
        Some(bytes) => {
            let (record, end) = decode_head(&bytes, key, &paths.head)?;
            (Some(record), end)
        }
        None => (None, 0),
    };
    let has_head = record.is_some();
    // From the head's last byte, which must end a line: a head that covers part of a line
    // does not describe this log.
    let from = head_end.saturating_sub(1);
    let read = read_from(&paths.log, from)?;
    let log_len = from + read.len() as u64;
    if log_len < head_end {
        let log_len = len_or_zero(&paths.log)?;
        return Err(corrupt(
            key,
            &paths.log,
            format!("the log is {log_len} bytes but its head covers {head_end}; acknowledged events are missing"),
        ));
    }
    let tail = if head_end > 0 {
        if read.first() != Some(&b'\n') {
            return Err(corrupt(
                key,
                &paths.log,
                format!("its head covers {head_end} bytes, which do not end on a line boundary"),
            ));
        }
        &read[1..]
    } else {
        &read[..]
    };
    let mut current = Current {
        record,
        log_end: head_end,
        log_len,
        head_end,
        unheaded: 0,
        has_head,
        damage: None,
    };
    fold_tail(&mut current, key, &paths.log, tail)?;
    if current.log_end < log_len {
        tracing::debug!(
            session = %key,
            bytes = log_len - current.log_end,
            "ignoring an unfinished append at the end of the log"
        );
    }
    Ok(current)
}

/// Folds the complete appends of the log past the head (`tail`) onto `current`, moving its
/// `log_end` past each. Stops at the first unreadable line, which is the torn end of an
/// unfinished append — unless the line or a complete line after it carries a commit marker:
/// then the append was written whole, and the unreadable line is damage to it, as is an append
/// whose length or CRC differs from what its marker records.
fn fold_tail(
    current: &mut Current,
    key: &SessionKey,
    path: &Path,
    tail: &[u8],
) -> Result<(), StoreError> {
    let mut pending: Vec<Event> = Vec::new();
    let mut plain = line::PlainCheck::default();
    let mut pos = 0;
    while let Some(nl) = tail[pos..].iter().position(|&b| b == b'\n') {
        let at = current.head_end + pos as u64;
        let text = &tail[pos..pos + nl];
        let Ok((event, marker)) = line::decode(text) else {
            if line::is_marked(text) || marked_line_follows(&tail[pos + nl + 1..]) {
                return Err(corrupt(
                    key,
                    path,
                    format!(
                        "unreadable line at byte {at}, inside an append that was written whole"
                    ),
                ));
            }
            break;
        };
        pos += nl + 1;
        plain.add(text, marker.as_ref());
        pending.push(event);
        if let Some(marker) = marker {
            let found = plain.take();
            if marker.check.is_some_and(|recorded| recorded != found) {
                return Err(corrupt(
                    key,
                    path,
                    format!(
                        "the append ending at byte {at} (version {}) does not match the length and CRC its marker records: it was damaged after it was written",
                        marker.version
                    ),
                ));
            }
            commit(
                current,
                key,
                path,
                std::mem::take(&mut pending),
                marker.version,
                at,
            )?;
            current.log_end = current.head_end + pos as u64;
        }
    }
    Ok(())
}

/// Whether `bytes` hold a complete line that carries a commit marker.
fn marked_line_follows(bytes: &[u8]) -> bool {
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => return false,
    };
    complete.split(|&b| b == b'\n').any(line::is_marked)
}

/// Folds one complete append (`events`, marked `version` on its last line, at byte `at`) onto
/// `current`, checking that it continues the log.
fn commit(
    current: &mut Current,
    key: &SessionKey,
    path: &Path,
    events: Vec<Event>,
    version: u64,
    at: u64,
) -> Result<(), StoreError> {
    let mut record = match current.record.take() {
        Some(record) => record,
        None => SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
    };
    if events.first().map(|e| e.seq) != Some(record.next_seq) || !is_dense(&events) {
        return Err(corrupt(
            key,
            path,
            format!(
                "the append ending at byte {at} does not continue the log at seq {}",
                record.next_seq
            ),
        ));
    }
    // Checked: the base comes from a head on disk, which may hold any number.
    if record.version.checked_add(1) != Some(version) {
        return Err(corrupt(
            key,
            path,
            format!(
                "the append ending at byte {at} is marked version {version}, not one past {}",
                record.version
            ),
        ));
    }
    for event in &events {
        record.apply(event);
    }
    record.version = version;
    current.record = Some(record);
    current.unheaded = current.unheaded.saturating_add(1);
    Ok(())
}

fn is_dense(events: &[Event]) -> bool {
    events
        .windows(2)
        .all(|w| w[0].seq.checked_add(1) == Some(w[1].seq))
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

/// Reads a file from byte `from` to its end as it is now; empty when it does not exist or is
/// shorter.
pub(super) fn read_from(path: &Path, from: u64) -> Result<Vec<u8>, StoreError> {
    super::fsio::read_tail_from(path, from)
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
    if window == 0 || (end == 0 && next_seq <= 1) {
        return Ok(Vec::new());
    }
    if end == 0 {
        return Err(corrupt(
            key,
            &paths.log,
            format!(
                "the log holds no event, its head promises {}",
                next_seq.saturating_sub(1)
            ),
        ));
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
    for text in bytes[..bytes.len() - 1].split(|&b| b == b'\n') {
        let (event, _marker) = line::decode(text).map_err(|e| {
            corrupt(
                key,
                &paths.log,
                format!("unreadable event at byte {offset}: {e}"),
            )
        })?;
        offset += text.len() as u64 + 1;
        events.push(event);
    }
    let first_ok = start > 0 || events.first().is_some_and(|e| e.seq == 1);
    let last_ok = events
        .last()
        .is_some_and(|e| e.seq.checked_add(1) == Some(next_seq));
    if !first_ok || !last_ok || !is_dense(&events) {
        return Err(corrupt(
            key,
            &paths.log,
            format!("the newest events do not end densely right before seq {next_seq}, as the head says"),
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
/// from the start. The log must hold every event from seq 1 densely; read to its end, it must
/// stop right before `next_seq` (the head's), so that a log shorter than its head promises is
/// `Corrupt`, never a silently shorter history.
pub(super) fn scan(
    paths: &SessionPaths,
    key: &SessionKey,
    end: u64,
    next_seq: Seq,
    from: Seq,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    if limit == 0 {
        return Ok(events);
    }
    let mut expected: Seq = 1;
    if end > 0 {
        let file = File::open(&paths.log).map_err(io_error("open", &paths.log))?;
        let mut reader = BufReader::new(file.take(end));
        let mut buf = Vec::new();
        let mut offset = 0u64;
        loop {
            buf.clear();
            let read = reader
                .read_until(b'\n', &mut buf)
                .map_err(io_error("read", &paths.log))?;
            if read == 0 {
                break;
            }
            if buf.last() != Some(&b'\n') {
                return Err(corrupt(
                    key,
                    &paths.log,
                    format!("unfinished line at byte {offset}"),
                ));
            }
            let text = &buf[..buf.len() - 1];
            let bad = |e: serde_json::Error| {
                corrupt(
                    key,
                    &paths.log,
                    format!("unreadable event at byte {offset}: {e}"),
                )
            };
            // A marked line's leading `_v` is an unknown field to `SeqOnly`, skipped like any
            // other.
            let seq = serde_json::from_slice::<SeqOnly>(text).map_err(bad)?.seq;
            if seq != expected {
                return Err(corrupt(
                    key,
                    &paths.log,
                    format!("the event at byte {offset} has seq {seq}, not {expected}"),
                ));
            }
            expected = seq.saturating_add(1);
            if seq >= from {
                events.push(line::decode(text).map_err(bad)?.0);
                if events.len() == limit {
                    return Ok(events);
                }
            }
            offset += read as u64;
        }
    }
    if expected != next_seq {
        return Err(corrupt(
            key,
            &paths.log,
            format!(
                "the log holds {} events, its head promises {}; acknowledged events are missing or the head is damaged",
                expected - 1,
                next_seq.saturating_sub(1)
            ),
        ));
    }
    Ok(events)
}

#[cfg(test)]
mod tests;
