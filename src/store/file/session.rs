//! One session's blocking operations: append and its rollback. The caller holds the session's
//! lock, so nothing else writes these files meanwhile.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::fsio::{commit, create_dirs, io_error, stage, sync_dir};
use super::layout::{session_dir_chain, SessionPaths};
use super::log::{encode_head, read_current};
use crate::key::SessionKey;
use crate::state::{Event, SessionRecord, SplitDelta};
use crate::store::{check_continues, StoreError};

/// An append whose events are durable in the log and whose new head is staged (written and
/// fsync'd beside `head.json`) but not yet renamed into place.
pub(super) struct PendingHead {
    /// The head after the append.
    pub record: SessionRecord,
    /// The `user:` and `app:` changes the events made, for the shared-state files.
    pub shared: SplitDelta,
    /// The staged head file.
    staged: PathBuf,
    /// The log length before the append, to roll back to.
    old_end: u64,
}

/// Checks the version, appends `events` to the log and fsyncs it, then stages the new head. Costs O(events + head): the log before the append is never read (beyond an
/// unheaded tail left by a crash).
pub(super) fn append_log(
    root: &Path,
    paths: &SessionPaths,
    key: &SessionKey,
    base_version: u64,
    events: &[Event],
) -> Result<PendingHead, StoreError> {
    let current = read_current(paths, key)?;
    let found = current.record.as_ref().map_or(0, |r| r.version);
    if found != base_version {
        return Err(StoreError::Conflict {
            key: key.clone(),
            expected: base_version,
            found,
        });
    }
    let mut record = current
        .record
        .unwrap_or_else(|| SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)));
    check_continues(key, record.next_seq, events)?;

    let mut lines = Vec::with_capacity(events.len() * 256);
    let mut shared = SplitDelta::default();
    for event in events {
        serde_json::to_writer(&mut lines, event).map_err(|e| {
            StoreError::InvalidRequest(format!(
                "session {key}: event {} cannot be serialised: {e}",
                event.seq
            ))
        })?;
        lines.push(b'\n');
        record.apply(event);
        if let Some(delta) = &event.state_delta {
            shared.merge(SplitDelta::from_delta(delta));
        }
    }
    record.version += 1;
    let head = encode_head(&record, current.log_end + lines.len() as u64)?;

    if !paths.dir.exists() {
        create_dirs(&session_dir_chain(root, key))?;
    }
    let new_file = current.file_len == 0 && !paths.log.exists();
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.log)
        .map_err(io_error("open", &paths.log))?;
    if current.file_len > current.log_end {
        // A torn write of an append that never returned Ok: cut it before writing after it.
        log.set_len(current.log_end)
            .map_err(io_error("truncate torn tail of", &paths.log))?;
    }
    // Staging the head at the same time as the log's fsync (on a second thread) was measured:
    // no faster on ext4, where both wait for the same journal commit, and 75 µs slower to spawn.
    let written = log
        .write_all(&lines)
        .and_then(|()| log.sync_data())
        .map_err(io_error("append to", &paths.log));
    let staged = written.and_then(|()| stage(&paths.head, &head));
    let staged = match staged {
        Ok(staged) => staged,
        Err(e) => {
            rollback(paths, current.log_end);
            return Err(e);
        }
    };
    if new_file {
        sync_dir(&paths.dir)?;
    }
    Ok(PendingHead {
        record,
        shared,
        staged,
        old_end: current.log_end,
    })
}

/// Renames the staged head into place, completing the append. If this fails, the head on disk
/// is the old or the new one; either way the log holds the events, which reads fold in again
/// (see `log.rs`), so the append is not rolled back.
pub(super) fn write_head(paths: &SessionPaths, pending: &PendingHead) -> Result<u64, StoreError> {
    commit(&pending.staged, &paths.head)?;
    Ok(pending.record.version)
}

/// Undoes a pending append whose later steps failed, so that a failed call leaves the session as
/// it was. Best effort: if this fails too, the events stay and reads fold them in, as after a
/// crash.
pub(super) fn abandon(paths: &SessionPaths, pending: &PendingHead) {
    rollback(paths, pending.old_end);
    // Best effort too: a staged head left behind is never read, and is overwritten next time.
    let _ = std::fs::remove_file(&pending.staged);
}

fn rollback(paths: &SessionPaths, end: u64) {
    let result = OpenOptions::new()
        .write(true)
        .open(&paths.log)
        .and_then(|log| log.set_len(end).and_then(|()| log.sync_data()));
    if let Err(e) = result {
        tracing::warn!(path = %paths.log.display(), error = %e, "could not roll back a failed append");
    }
}
