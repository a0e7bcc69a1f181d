//! Crash-safe replacement of whole files: the one implementation of temp file + fsync + rename +
//! folder fsync, used by the file session store (heads, shared state) and the file pairing store.
//! Blocking; run it on tokio's blocking pool.
//!
//! It speaks `std::io` and names the step that failed, so that each caller wraps the error in its
//! own layer's type.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content, never
/// a mix: write a temporary file beside it, fsync it, rename it over `path`, fsync the folder.
///
/// The temporary name is unique per call, so two writers never share one; a temporary left by a
/// crash is harmless (it is never read) and is named `<file>.<random>.tmp`.
///
/// On failure, [`WriteFailed::replaced`] tells whether `path` already holds the new content
/// (only the folder fsync failed): a caller that mirrors the file in memory must then take the
/// new content too, or its next write would silently undo this one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteFailed> {
    let tmp = temporary_beside(path);
    let staged = (|| {
        let mut file = File::create(&tmp).map_err(step("create", &tmp))?;
        file.write_all(bytes).map_err(step("write", &tmp))?;
        file.sync_all().map_err(step("fsync", &tmp))?;
        fs::rename(&tmp, path).map_err(step("rename into place", path))
    })();
    if let Err(failed) = staged {
        // Best effort: the temporary is never read, so leaving it behind only costs space.
        let _ = fs::remove_file(&tmp);
        return Err(failed);
    }
    sync_parent(path).map_err(|source| WriteFailed {
        op: "fsync folder",
        path: path.to_path_buf(),
        replaced: true,
        source,
    })
}

/// Replaces `path` with `bytes` by a temporary file renamed over it, without any flush: readers
/// see the old or the new content, never a mix, but after a power cut the file may hold neither
/// (a renamed file whose content never reached the disk). Only for a caller that made the
/// content durable elsewhere first (the file store's journal) and writes it back on recovery.
pub(crate) fn replace_unflushed(path: &Path, bytes: &[u8]) -> Result<(), WriteFailed> {
    let tmp = temporary_beside(path);
    let staged = (|| {
        let mut file = File::create(&tmp).map_err(step("create", &tmp))?;
        file.write_all(bytes).map_err(step("write", &tmp))?;
        fs::rename(&tmp, path).map_err(step("rename into place", path))
    })();
    if staged.is_err() {
        // Best effort: the temporary is never read, so leaving it behind only costs space.
        let _ = fs::remove_file(&tmp);
    }
    staged
}

/// A failed [`write_atomic`].
#[derive(Debug)]
pub(crate) struct WriteFailed {
    /// The step that failed: `create`, `write`, `fsync`, `rename into place` or `fsync folder`.
    pub op: &'static str,
    /// The file the step worked on (the temporary, or the target).
    pub path: PathBuf,
    /// The file was renamed into place; only making the rename durable failed.
    pub replaced: bool,
    /// What failed.
    pub source: io::Error,
}

fn step(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteFailed {
    let path = path.to_path_buf();
    move |source| WriteFailed {
        op,
        path,
        replaced: false,
        source,
    }
}

/// Reads a whole file; `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    PathBuf::from(name)
}

/// Makes the entries of `dir` (creations, renames, removals) durable: a renamed entry survives a
/// power cut only once its folder is synced.
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Folders cannot be opened as files here; renames are durable by the platform's own rules.
#[cfg(not(unix))]
pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Fsyncs the folder that holds `path` (nothing for a bare file name: the current folder).
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc.json");
        assert_eq!(read_optional(&path).unwrap(), None);
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(read_optional(&path).unwrap().as_deref(), Some(&b"two"[..]));
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the target remains");
    }

    #[test]
    fn a_failed_write_leaves_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-folder").join("doc.json");
        let failed = write_atomic(&path, b"x").unwrap_err();
        assert_eq!((failed.op, failed.replaced), ("create", false));
        assert_eq!(read_optional(&path).unwrap(), None);
    }
}
