//! Crash-safe file-system steps of the file store: atomic replacement and folder fsync (through
//! the crate's one [`atomic_file`] helper, with errors as [`StoreError`]s), folder creation and
//! removal, file stamps. Blocking; callers run them on tokio's blocking pool.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::atomic_file;
use crate::store::StoreError;

/// Wraps an I/O error with what was being done and where.
pub(super) fn io_error(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content, never a
/// mix (see [`atomic_file::write_atomic`], the one implementation of these steps).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    atomic_file::write_atomic(path, bytes).map_err(|failed| StoreError::Io {
        op: failed.op,
        path: failed.path,
        source: failed.source,
    })
}

/// Replaces `path` with `bytes` like [`write_atomic`] but flushes nothing (see
/// [`atomic_file::replace_unflushed`]): for content a journal entry made durable first.
pub(super) fn replace_unflushed(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    atomic_file::replace_unflushed(path, bytes).map_err(|failed| StoreError::Io {
        op: failed.op,
        path: failed.path,
        source: failed.source,
    })
}

/// Makes the entries of `dir` (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    atomic_file::sync_dir(dir).map_err(io_error("fsync folder", dir))
}

/// Fsyncs the folder that holds `path`.
fn sync_parent(path: &Path) -> Result<(), StoreError> {
    match path.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Creates each missing folder of `chain` (outermost first) and fsyncs its parent, so that a
/// file later fsync'd inside is reachable after a crash. Returns whether the last one was new.
pub fn create_dirs(chain: &[PathBuf]) -> Result<bool, StoreError> {
    let mut created = false;
    for dir in chain {
        created = match fs::create_dir(dir) {
            Ok(()) => {
                sync_parent(dir)?;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io_error("create folder", dir)(e)),
        };
    }
    Ok(created)
}

/// Like [`create_dirs`], and also fsyncs the parent of each folder of `chain` that existed
/// already: folders made without a flush (by a journaled write, durable only through the
/// journal until its checkpoint) become durable on their own.
pub(super) fn create_durable_dirs(chain: &[PathBuf]) -> Result<(), StoreError> {
    for dir in chain {
        if !create_dirs(std::slice::from_ref(dir))? {
            sync_parent(dir)?;
        }
    }
    Ok(())
}

/// Removes a folder and everything in it as one durable step: it is renamed into `trash` (atomic,
/// fsync'd), then deleted at leisure. A crash mid-way leaves it whole in `trash`, which
/// [`empty_trash`] clears on the next open — never half a session that could come back.
///
/// Returns whether `dir` existed.
pub fn remove_dir(dir: &Path, trash: &Path) -> Result<bool, StoreError> {
    create_dirs(&[trash.to_path_buf()])?;
    let target = trash.join(uuid::Uuid::new_v4().simple().to_string());
    match fs::rename(dir, &target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error("move to trash", dir)(e)),
    }
    sync_parent(dir)?;
    sync_dir(trash)?;
    fs::remove_dir_all(&target).map_err(io_error("remove", &target))?;
    Ok(true)
}

/// Deletes what a crash left in `trash`.
pub(super) fn empty_trash(trash: &Path) -> Result<(), StoreError> {
    match fs::remove_dir_all(trash) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("empty trash", trash)(e)),
    }
}

/// Reads a whole file; `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    atomic_file::read_optional(path).map_err(io_error("read", path))
}

/// One version of a file, told apart cheaply: a file replaced by rename gets a new inode, one
/// rewritten in place a new length or modification time. Used to notice that a file changed
/// behind the store's back, not as a checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }
}

/// The stamp of a file; `None` when it does not exist.
pub(super) fn stamp_optional(path: &Path) -> Result<Option<Stamp>, StoreError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some(Stamp::of(&meta))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("stat", path)(e)),
    }
}

/// Reads a whole file with the stamp of the very version read; `None` when it does not exist.
pub(super) fn read_stamped(path: &Path) -> Result<Option<(Vec<u8>, Stamp)>, StoreError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    let meta = file.metadata().map_err(io_error("stat", path))?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    Ok(Some((bytes, Stamp::of(&meta))))
}

/// The length of a file; 0 when it does not exist.
pub(super) fn len_or_zero(path: &Path) -> Result<u64, StoreError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_error("stat", path)(e)),
    }
}
