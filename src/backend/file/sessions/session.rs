//! One session's append, in its steps: prepare (pure), write the log, and now and then the head.
//! The caller holds the session's lock, so nothing else writes these files meanwhile.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use super::fsio::{io_error, stamp_optional, sync_dir};
use super::journal::Entry;
use super::layout::{SessionPaths, LOG_FILE};
use super::line;
use super::log::{encode_head, read_from, Current};
use crate::key::SessionKey;
use crate::state::{Event, SessionRecord, SplitDelta};
use crate::store::{check_continues, StoreError};

/// `head.json` is rewritten once this many appends lie past it in the log.
///
/// Rewriting it costs a journal entry the size of the head (covered by the journal's next shared
/// flush), then a temporary file renamed over it, with no flush of its own; once every 32 appends
/// that adds little to an append on average. In exchange, a read that finds no remembered state (the first load after a restart, a listing,
/// `gc`) parses at most 31 appends' events past the head — tens of microseconds for chat-sized
/// turns, independent of the history's length.
pub(super) const HEAD_EVERY: u32 = 32;

/// `head.json` is also rewritten once the log past it reaches this many bytes, so that sessions
/// with large appends (imports, long tool output) keep the same bound on what a cold read parses.
pub(super) const HEAD_EVERY_BYTES: u64 = 256 * 1024;

/// An append checked and encoded, not yet written.
pub(super) struct Prepared {
    /// The session's version after the append.
    pub version: u64,
    /// The session's state once the append is in the log.
    pub after: Current,
    /// The log lines to write, the last one marked with the new version.
    lines: Vec<u8>,
    /// The `user:` and `app:` changes the events made, for the shared-state files.
    pub shared: SplitDelta,
}

/// Checks the version and the sequence, folds `events` onto the head and encodes their lines.
/// Pure: nothing is written.
pub(super) fn prepare(
    key: &SessionKey,
    current: &Current,
    base_version: u64,
    events: &[Event],
) -> Result<Prepared, StoreError> {
    let found = current.record.as_ref().map_or(0, |r| r.version);
    if found != base_version {
        return Err(StoreError::Conflict {
            key: key.clone(),
            expected: base_version,
            found,
        });
    }
    let mut record = match &current.record {
        Some(record) => record.clone(),
        None => SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
    };
    check_continues(key, record.next_seq, events)?;
    let mut shared = SplitDelta::default();
    for event in events {
        record.apply(event);
        if let Some(delta) = &event.state_delta {
            shared.merge(SplitDelta::from_delta(delta));
        }
    }
    record.version += 1;
    let lines = line::encode_append(events, record.version).map_err(|e| {
        StoreError::InvalidRequest(format!("session {key}: events cannot be serialised: {e}"))
    })?;
    let log_end = current.log_end + lines.len() as u64;
    // An append with no events writes no line: the log, unfinished tail included, stays as is.
    let log_len = if lines.is_empty() {
        current.log_len
    } else {
        log_end
    };
    Ok(Prepared {
        version: record.version,
        after: Current {
            record: Some(record),
            log_end,
            log_len,
            head_end: current.head_end,
            unheaded: current.unheaded.saturating_add(1),
            head: current.head,
        },
        lines,
        shared,
    })
}

impl Prepared {
    /// Whether the append has no events, hence no log line to carry its commit marker.
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Creates the session's folders if it is new, without flushing: the journal entry of the
/// append that follows recreates them after a crash, and its checkpoint flushes them.
pub(super) fn ensure_dirs(paths: &SessionPaths, current: &Current) -> Result<(), StoreError> {
    // A session with a head or a log has its folders; only a new one may need them.
    if current.record.is_none() && !paths.dir.exists() {
        std::fs::create_dir_all(&paths.dir).map_err(io_error("create folder", &paths.dir))?;
    }
    Ok(())
}

/// Appends the prepared lines to the log, first cutting off an unfinished append a crash left
/// behind, and returns the journal entry that makes them durable: the log is not flushed here,
/// so the append is acknowledged only once the journal has flushed the entry. On failure the log
/// is rolled back to `current.log_end`. Costs O(events): the log before the append is never read.
pub(super) fn write_log(
    root: &Path,
    paths: &SessionPaths,
    key: &SessionKey,
    current: &Current,
    prepared: Prepared,
) -> Result<(Entry, Prepared), StoreError> {
    ensure_dirs(paths, current)?;
    if current.log_len > current.log_end {
        // An append that never completed lies past the valid end: copy it aside before it is
        // cut. Nothing is written yet, so a failure here leaves the log as it is.
        keep_cut(paths, key, current.log_end)?;
    }
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.log)
        .map_err(io_error("open", &paths.log))?;
    let cut = if current.log_len > current.log_end {
        // Cut the unfinished append (copied above) before writing after it.
        log.set_len(current.log_end)
            .map_err(io_error("truncate the unfinished append in", &paths.log))
    } else {
        Ok(())
    };
    let written = cut.and_then(|()| {
        log.write_all(&prepared.lines)
            .map_err(io_error("append to", &paths.log))
    });
    if let Err(e) = written {
        rollback(paths, current.log_end);
        return Err(e);
    }
    let relative = paths.log.strip_prefix(root).map_err(|_| {
        StoreError::InvalidRequest(format!(
            "session {key}: its log is outside the store's root"
        ))
    })?;
    let mut prepared = prepared;
    let entry = Entry::Append {
        path: relative.to_owned(),
        at: current.log_end,
        bytes: std::mem::take(&mut prepared.lines),
    };
    Ok((entry, prepared))
}

/// Most side files kept for cuts at one offset (each a crash at the same point of the log); past
/// that, appends fail rather than drop bytes without a copy.
const MAX_CUT_COPIES: u32 = 100;

/// Copies the log's bytes from `from` to its end — the unfinished append about to be cut — into
/// `log.jsonl.cut-<from>` beside it (fsync'd, with its folder), and says so at `warn` level.
///
/// Those bytes were never acknowledged as far as the log can tell: they end in no intact commit
/// marker. But the same picture is left by damage to the very end of the last acknowledged append
/// (its marker or final newline), which no reader can tell from a torn write; the copy lets an
/// operator recover such an append by hand instead of losing it. Failing to keep the copy fails
/// the append and cuts nothing.
fn keep_cut(paths: &SessionPaths, key: &SessionKey, from: u64) -> Result<(), StoreError> {
    let bytes = read_from(&paths.log, from)?;
    if bytes.is_empty() {
        return Ok(());
    }
    let base = format!("{LOG_FILE}.cut-{from}");
    for n in 0..MAX_CUT_COPIES {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let path = paths.dir.join(name);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error("create", &path)(e)),
        };
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(io_error("write", &path))?;
        sync_dir(&paths.dir)?;
        tracing::warn!(
            session = %key,
            at = from,
            bytes = bytes.len(),
            copy = %path.display(),
            "cutting an unfinished append off the log; its bytes are kept in the copy"
        );
        return Ok(());
    }
    Err(StoreError::Io {
        op: "keep a copy of the unfinished append in",
        path: paths.dir.join(base),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{MAX_CUT_COPIES} copies of cuts at this offset exist already"),
        ),
    })
}

/// Whether an append leaving the session at `after` rewrites `head.json`: the session has none
/// yet (so that its key is on disk for listings and `gc`), or [`HEAD_EVERY`] appends or
/// [`HEAD_EVERY_BYTES`] lie past it.
pub(super) fn head_due(after: &Current) -> bool {
    after.head.is_none()
        || after.unheaded >= HEAD_EVERY
        || after.log_end - after.head_end >= HEAD_EVERY_BYTES
}

/// The new `head.json` for `after` — its record, covering its log up to `after.log_end` — as a
/// journal entry. The journal writes it to the file once the entry is durable, so that a crash
/// leaves the old head, or a new one the journal's replay writes again.
pub(super) fn head_entry(
    root: &Path,
    paths: &SessionPaths,
    key: &SessionKey,
    after: &Current,
) -> Result<Option<Entry>, StoreError> {
    let Some(record) = after.record.as_ref() else {
        return Ok(None);
    };
    let relative = paths.head.strip_prefix(root).map_err(|_| {
        StoreError::InvalidRequest(format!(
            "session {key}: its head is outside the store's root"
        ))
    })?;
    Ok(Some(Entry::Replace {
        path: relative.to_owned(),
        bytes: encode_head(record, after.log_end)?,
    }))
}

/// The session's state once the journal wrote the head [`head_entry`] made.
pub(super) fn headed(paths: &SessionPaths, mut after: Current) -> Result<Current, StoreError> {
    after.head = stamp_optional(&paths.head)?;
    after.head_end = after.log_end;
    after.unheaded = 0;
    Ok(after)
}

/// Cuts the log back to `end`, undoing an append whose later steps failed, so that a failed call
/// leaves the session as it was. Best effort: if this fails too, the append stays and reads fold
/// it in, as after a crash.
pub(super) fn rollback(paths: &SessionPaths, end: u64) {
    let result = OpenOptions::new()
        .write(true)
        .open(&paths.log)
        .and_then(|log| log.set_len(end).and_then(|()| log.sync_data()));
    if let Err(e) = result {
        tracing::warn!(path = %paths.log.display(), error = %e, "could not roll back a failed append");
    }
}
