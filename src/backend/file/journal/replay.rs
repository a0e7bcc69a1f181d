//! Reading what a previous run left in the journal and writing it onto the files again; flushing
//! files and their folders (for replays and checkpoints alike).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::format::{read_segment, Entry, ReadError, SEGMENT_VERSION};
use crate::backend::file::fsio::{io_error, open_in_place, remove_dir, sync_dir, write_atomic};
use crate::backend::file::layout::{refuse_links, TRASH_DIR};
use crate::store::StoreError;

/// The segments in `dir`, oldest first. Other files there are left alone (with a warning).
pub(super) fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for item in fs::read_dir(dir).map_err(io_error("list", dir))? {
        let item = item.map_err(io_error("list", dir))?;
        let name = item.file_name();
        let number = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok());
        match number {
            Some(number) => found.push((number, item.path())),
            None => tracing::warn!(
                file = %item.path().display(),
                "not a journal segment; left alone"
            ),
        }
    }
    found.sort();
    Ok(found)
}

/// Writes every entry of `segments` (in order) onto the files under `root`, then flushes what
/// it touched. An append the file already holds is not written again; one whose file ends
/// before it is damage (`Corrupt`): bytes acknowledged earlier are missing. Appends to a folder
/// a later entry removes are skipped (the removal was durable when it was made).
pub(super) fn replay(root: &Path, segments: &[(u64, PathBuf)]) -> Result<(), StoreError> {
    let mut entries = Vec::new();
    for (i, (_, path)) in segments.iter().enumerate() {
        let bytes = fs::read(path).map_err(io_error("read", path))?;
        let last = i + 1 == segments.len();
        let read = read_segment(&bytes, last).map_err(|e| match e {
            ReadError::Newer(found) => StoreError::NewerLayout {
                backend: "file",
                place: path.display().to_string(),
                found,
                supported: SEGMENT_VERSION,
            },
            ReadError::Damaged(detail) => StoreError::Corrupt {
                key: "journal".to_owned(),
                detail: format!("{}: {detail}", path.display()),
            },
        })?;
        if read.unfinished {
            tracing::warn!(
                segment = %path.display(),
                at = read.valid_len,
                "ignoring the unfinished batch a crash left at the journal's end (none of it was acknowledged)"
            );
        }
        entries.extend(read.entries);
    }
    if entries.is_empty() {
        return Ok(());
    }
    let removed_later = removed_later(&entries);
    let mut touched = BTreeSet::new();
    for (entry, removed) in entries.iter().zip(removed_later) {
        match entry {
            Entry::Append { path, at, bytes } if !removed => {
                write_again(root, path, *at, bytes)?;
                touched.insert(path.clone());
            }
            Entry::Replace { path, bytes } if !removed => {
                let full = root.join(path);
                refuse_links(root, &[&full])?;
                if let Some(parent) = full.parent() {
                    fs::create_dir_all(parent).map_err(io_error("create folder", parent))?;
                }
                write_atomic(&full, bytes)?;
                touched.insert(path.clone());
            }
            Entry::Append { .. } | Entry::Replace { .. } => {}
            Entry::Remove { path } => {
                let dir = root.join(path);
                refuse_links(root, &[&dir])?;
                remove_dir(&dir, &root.join(TRASH_DIR))?;
            }
        }
    }
    tracing::info!(
        files = touched.len(),
        entries = entries.len(),
        "replayed the file store's journal"
    );
    flush_files(root, touched.iter().map(PathBuf::as_path))
}

/// For each entry, whether a later entry removes a folder that holds it.
fn removed_later(entries: &[Entry]) -> Vec<bool> {
    let mut removed: HashSet<&Path> = HashSet::new();
    let mut answer = vec![false; entries.len()];
    for (i, entry) in entries.iter().enumerate().rev() {
        match entry {
            Entry::Remove { path } => {
                removed.insert(path);
            }
            Entry::Append { path, .. } | Entry::Replace { path, .. } => {
                answer[i] = path.ancestors().any(|a| removed.contains(a));
            }
        }
    }
    answer
}

/// Makes `root/path` hold `bytes` at `at`, ending there: unless it already does.
fn write_again(root: &Path, path: &Path, at: u64, bytes: &[u8]) -> Result<(), StoreError> {
    let full = root.join(path);
    refuse_links(root, &[&full])?;
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent).map_err(io_error("create folder", parent))?;
    }
    let (mut file, len) = open_in_place(&full)?;
    if len < at {
        return Err(StoreError::Corrupt {
            key: "journal".to_owned(),
            detail: format!(
                "{}: the journal holds an append at byte {at}, but the file has only {len} bytes; \
                 bytes acknowledged before it are missing",
                full.display()
            ),
        });
    }
    let end = at + bytes.len() as u64;
    if len >= end && holds(&mut file, at, bytes).map_err(io_error("read", &full))? {
        return Ok(());
    }
    file.set_len(at)
        .and_then(|()| file.seek(SeekFrom::Start(at)))
        .and_then(|_| file.write_all(bytes))
        .map_err(io_error("write", &full))
}

/// Whether `file` holds `bytes` at `at`.
fn holds(file: &mut fs::File, at: u64, bytes: &[u8]) -> io::Result<bool> {
    file.seek(SeekFrom::Start(at))?;
    let mut found = vec![0; bytes.len()];
    file.read_exact(&mut found)?;
    Ok(found == bytes)
}

/// Flushes everything written to the file system that holds `root` and not yet flushed, by any
/// process: `syncfs` on Linux, `sync` elsewhere.
pub(super) fn flush_file_system(root: &Path) -> Result<(), StoreError> {
    #[cfg(target_os = "linux")]
    {
        let folder = fs::File::open(root).map_err(io_error("open", root))?;
        rustix::fs::syncfs(&folder)
            .map_err(|e| io_error("flush the file system of", root)(io::Error::from(e)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        rustix::fs::sync();
        Ok(())
    }
}

/// Flushes each file (relative to `root`) and every folder from it up to `root`, so that what
/// the files hold and the folder entries that reach them are durable. A file removed since is
/// skipped: its removal was made durable when it happened.
pub(super) fn flush_files<'a>(
    root: &Path,
    files: impl Iterator<Item = &'a Path>,
) -> Result<(), StoreError> {
    let mut folders = BTreeSet::new();
    for relative in files {
        let full = root.join(relative);
        match fs::File::open(&full) {
            Ok(file) => file.sync_data().map_err(io_error("fsync", &full))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error("open", &full)(e)),
        }
        folders.extend(relative.ancestors().skip(1).map(|a| root.join(a)));
    }
    // Deepest first, so that each folder's entry in its parent is flushed after its own.
    for folder in folders.iter().rev() {
        match sync_dir(folder) {
            Ok(()) => {}
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
