//! One user's memory log on disk: JSON lines, appended and fsync'd, rewritten whole (atomically)
//! only when entries are removed. Blocking; run on tokio's blocking pool.
//!
//! A line is either an entry added or a session's mark (the highest seq ingested, kept when
//! its entries are forgotten). A last line without its newline is an append cut short by a
//! crash: it was never acknowledged, so it is cut off. Any other line that cannot be read makes
//! the whole log [`MemoryError::Corrupt`]; it is left in place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{read_optional, sync_dir, write_atomic};
use crate::key::SessionKey;
use crate::memory::{MemoryEntry, MemoryError, UserIndex};
use crate::state::Seq;

/// One line of a user's log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Line {
    /// An entry was added.
    Add { entry: MemoryEntry },
    /// The session was ingested through `seq` (written on rewrites, for forgotten entries).
    Mark { key: SessionKey, seq: Seq },
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> MemoryError {
    let path = path.to_path_buf();
    move |source| MemoryError::Io { op, path, source }
}

/// Reads a user's log into an index; a missing file is an empty index. A torn last line is cut
/// off the file. Lines of another user, or unreadable ones, are [`MemoryError::Corrupt`].
pub(super) fn load(path: &Path, user: &str) -> Result<UserIndex, MemoryError> {
    let Some(bytes) = read_optional(path).map_err(io_error("read", path))? else {
        return Ok(UserIndex::new());
    };
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut index = UserIndex::new();
    for (number, line) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let corrupt = |detail: String| MemoryError::Corrupt {
            user: user.to_owned(),
            detail: format!("{} line {}: {detail}", path.display(), number + 1),
        };
        match serde_json::from_slice::<Line>(line).map_err(|e| corrupt(e.to_string()))? {
            Line::Add { entry } if entry.key.user_id() == user => {
                index.insert(entry);
            }
            Line::Mark { key, seq } if key.user_id() == user => index.raise_mark(&key, seq),
            _ => return Err(corrupt("a line of another user".into())),
        }
    }
    if complete < bytes.len() {
        cut_torn_tail(path, complete as u64)?;
    }
    Ok(index)
}

/// Cuts an append that a crash left unfinished (it was never acknowledged).
fn cut_torn_tail(path: &Path, keep: u64) -> Result<(), MemoryError> {
    tracing::warn!(path = %path.display(), keep, "memory log: cutting an unfinished append");
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_error("open", path))?;
    file.set_len(keep).map_err(io_error("truncate", path))?;
    file.sync_all().map_err(io_error("fsync", path))
}

/// Appends entries and fsyncs them; a new file's folder is fsync'd too.
pub(super) fn append(path: &Path, entries: &[MemoryEntry]) -> Result<(), MemoryError> {
    let mut buffer = Vec::with_capacity(entries.len() * 256);
    for entry in entries {
        let line = Line::Add {
            entry: entry.clone(),
        };
        serde_json::to_writer(&mut buffer, &line).map_err(|e| MemoryError::Io {
            op: "encode",
            path: path.to_path_buf(),
            source: io::Error::other(e),
        })?;
        buffer.push(b'\n');
    }
    let existed = path.exists();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_error("open", path))?;
    file.write_all(&buffer).map_err(io_error("append", path))?;
    file.sync_data().map_err(io_error("fsync", path))?;
    if !existed {
        if let Some(dir) = path.parent() {
            sync_dir(dir).map_err(io_error("fsync folder", dir))?;
        }
    }
    Ok(())
}

/// Replaces the log with what `index` holds (marks, then entries), atomically; an index with
/// nothing left removes the file.
pub(super) fn rewrite(path: &Path, index: &UserIndex) -> Result<(), MemoryError> {
    if index.is_empty() && index.marks().next().is_none() {
        return remove(path);
    }
    let mut buffer = Vec::new();
    let encode = |buffer: &mut Vec<u8>, line: &Line| {
        serde_json::to_writer(&mut *buffer, line).map_err(|e| MemoryError::Io {
            op: "encode",
            path: path.to_path_buf(),
            source: io::Error::other(e),
        })?;
        buffer.push(b'\n');
        Ok::<_, MemoryError>(())
    };
    for (key, seq) in index.marks() {
        encode(
            &mut buffer,
            &Line::Mark {
                key: key.clone(),
                seq,
            },
        )?;
    }
    for entry in index.entries() {
        encode(
            &mut buffer,
            &Line::Add {
                entry: entry.clone(),
            },
        )?;
    }
    write_atomic(path, &buffer).map_err(|failed| MemoryError::Io {
        op: failed.op,
        path: failed.path,
        source: failed.source,
    })
}

/// Removes the log (and makes the removal durable). A missing file is fine.
pub(super) fn remove(path: &Path) -> Result<(), MemoryError> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("remove", path)(e)),
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir).map_err(io_error("fsync folder", dir))?;
    }
    Ok(())
}

/// Creates the memory folder if needed.
pub(super) fn create_root(root: &Path) -> Result<(), MemoryError> {
    fs::create_dir_all(root).map_err(io_error("create", root))?;
    // Opening proves it is a readable folder now rather than at the first search.
    File::open(root).map_err(io_error("open", root))?;
    Ok(())
}
