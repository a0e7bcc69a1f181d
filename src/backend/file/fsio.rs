//! Crash-safe file-system steps of the file store: atomic replacement and folder fsync (through
//! the crate's one [`atomic_file`] helper, with errors as [`StoreError`]s), folder creation and
//! removal, file stamps. Blocking; callers run them on tokio's blocking pool.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

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

/// The length of a file; 0 when it does not exist.
pub(super) fn len_or_zero(path: &Path) -> Result<u64, StoreError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_error("stat", path)(e)),
    }
}

/// Opens `path` to be read and written in place (created empty if missing, never truncated),
/// with its length: for writing bytes again at an offset the file may already hold.
pub(super) fn open_in_place(path: &Path) -> Result<(fs::File, u64), StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_error("open", path))?;
    let len = file.metadata().map_err(io_error("stat", path))?.len();
    Ok((file, len))
}

/// The bytes of `path` from `from` to its end (none if it does not exist).
pub(super) fn read_tail_from(path: &Path, from: u64) -> Result<Vec<u8>, StoreError> {
    let mut file = match fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    file.seek(SeekFrom::Start(from))
        .map_err(io_error("seek", path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(io_error("read", path))?;
    Ok(bytes)
}

/// Most side files kept for cuts at one offset (each a crash at the same point of the log); past
/// that, appends fail rather than drop bytes without a copy.
const MAX_CUT_COPIES: u32 = 100;

/// Copies the log's bytes from `from` to its end — the unfinished append about to be cut — into
/// `<log>.cut-<from>` beside it (fsync'd, with its folder), and says so at `warn` level.
///
/// Those bytes were never acknowledged as far as the log can tell: they end in no intact commit
/// marker. But the same picture is left by damage to the very end of the last acknowledged append
/// (its marker or final newline), which no reader can tell from a torn write; the copy lets an
/// operator recover such an append by hand instead of losing it. Failing to keep the copy fails
/// the append and cuts nothing.
pub(super) fn keep_cut(
    log: &Path,
    from: u64,
    session: &dyn std::fmt::Display,
) -> Result<(), StoreError> {
    let dir = log.parent().unwrap_or(Path::new("."));
    let bytes = read_tail_from(log, from)?;
    if bytes.is_empty() {
        return Ok(());
    }
    let name = log
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let base = format!("{name}.cut-{from}");
    for n in 0..MAX_CUT_COPIES {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let path = dir.join(name);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error("create", &path)(e)),
        };
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(io_error("write", &path))?;
        sync_dir(dir)?;
        tracing::warn!(
            %session,
            at = from,
            bytes = bytes.len(),
            copy = %path.display(),
            "cutting an unfinished append off the log; its bytes are kept in the copy"
        );
        return Ok(());
    }
    Err(StoreError::Io {
        op: "keep a copy of the unfinished append in",
        path: dir.join(base),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{MAX_CUT_COPIES} copies of cuts at this offset exist already"),
        ),
    })
}
