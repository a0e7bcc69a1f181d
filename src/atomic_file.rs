//! Crash-safe replacement of small whole files, for data that is rewritten as one document
//! (the pairing table). Blocking; run it on tokio's blocking pool.
//!
//! The session store has its own copy of these steps (`store/file/fsio.rs`) tied to its error
//! type; this one speaks `std::io` so that any module can wrap the error in its own.

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
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(source) = staged {
        // Best effort: the temporary is never read, so leaving it behind only costs space.
        let _ = fs::remove_file(&tmp);
        return Err(WriteFailed {
            replaced: false,
            source,
        });
    }
    sync_parent(path).map_err(|source| WriteFailed {
        replaced: true,
        source,
    })
}

/// A failed [`write_atomic`].
#[derive(Debug)]
pub(crate) struct WriteFailed {
    /// The file was renamed into place; only making the rename durable failed.
    pub replaced: bool,
    /// What failed.
    pub source: io::Error,
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

/// Makes the rename durable: a renamed entry survives a power cut only once its folder is synced.
#[cfg(unix)]
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => Ok(()),
    }
}

/// Folders cannot be opened as files here; renames are durable by the platform's own rules.
#[cfg(not(unix))]
fn sync_parent(_path: &Path) -> io::Result<()> {
    Ok(())
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
        assert!(write_atomic(&path, b"x").is_err());
        assert_eq!(read_optional(&path).unwrap(), None);
    }
}
