//! Crash-safe file-system steps: atomic replacement, directory fsync, folder creation and
//! removal. Blocking; callers run them on tokio's blocking pool.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::store::StoreError;

/// Wraps an I/O error with what was being done and where.
pub(super) fn io_error(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { op, path, source }
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content, never a
/// mix: write a temporary file, fsync it, rename it over `path`, fsync the folder.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = stage(path, bytes)?;
    commit(&tmp, path)
}

/// The first half of [`write_atomic`]: writes and fsyncs the temporary file. Until [`commit`],
/// `path` is untouched.
///
/// The temporary name is fixed per target: callers hold the lock that serialises writes of
/// `path`, and a temporary left by a crash is simply overwritten next time.
pub(super) fn stage(path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = File::create(&tmp).map_err(io_error("create", &tmp))?;
    file.write_all(bytes).map_err(io_error("write", &tmp))?;
    file.sync_all().map_err(io_error("fsync", &tmp))?;
    Ok(tmp)
}

/// The second half of [`write_atomic`]: renames the staged file over `path` and fsyncs the
/// folder. If this fails, `path` may hold either version.
pub(super) fn commit(tmp: &Path, path: &Path) -> Result<(), StoreError> {
    fs::rename(tmp, path).map_err(io_error("rename into place", path))?;
    sync_parent(path)
}

/// Makes the entries of `dir` (creations, renames, removals) durable.
#[cfg(unix)]
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error("fsync folder", dir))
}

/// Folders cannot be opened as files here; renames are durable by the platform's own rules.
#[cfg(not(unix))]
pub(super) fn sync_dir(_dir: &Path) -> Result<(), StoreError> {
    Ok(())
}

/// Fsyncs the folder that holds `path`.
pub(super) fn sync_parent(path: &Path) -> Result<(), StoreError> {
    match path.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Creates each missing folder of `chain` (outermost first) and fsyncs its parent, so that a
/// file later fsync'd inside is reachable after a crash. Returns whether the last one was new.
pub(super) fn create_dirs(chain: &[PathBuf]) -> Result<bool, StoreError> {
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

/// Removes a folder and everything in it as one durable step: it is renamed into `trash` (atomic,
/// fsync'd), then deleted at leisure. A crash mid-way leaves it whole in `trash`, which
/// [`empty_trash`] clears on the next open — never half a session that could come back.
///
/// Returns whether `dir` existed.
pub(super) fn remove_dir(dir: &Path, trash: &Path) -> Result<bool, StoreError> {
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
pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("read", path)(e)),
    }
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
