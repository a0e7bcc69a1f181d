//! The locks that make a store's root folder one process's for as long as its store is open.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::Path;

use super::fsio;
use super::layout::LOCK_FILE;
use crate::store::StoreError;

/// The two locks that make a root one process's: on the folder itself, which no clean-up of
/// "stale lock files" can delete from under a running process, and on the lock file, which
/// holds the holder's process id for the message a refused opener gives.
#[derive(Debug)]
pub(super) struct RootLock {
    _folder: File,
    _file: File,
}

/// Takes the root's locks (see [`RootLock`]): the lock file (whose refusal names the holder),
/// then the folder, which still refuses a second process when the lock file was deleted. Our
/// process id is written only once both are held.
pub(super) fn lock_root(root: &Path) -> Result<RootLock, StoreError> {
    let mut file = lock_file(root)?;
    let folder = File::open(root).map_err(fsio::io_error("open", root))?;
    match folder.try_lock() {
        Ok(()) => {
            let path = root.join(LOCK_FILE);
            file.set_len(0)
                .and_then(|()| write!(file, "{}", std::process::id()))
                .map_err(fsio::io_error("write", &path))?;
            Ok(RootLock {
                _folder: folder,
                _file: file,
            })
        }
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: root.to_owned(),
            detail: "held by another open store (its lock file was removed; the folder's own \
                     lock still holds)"
                .to_owned(),
        }),
        Err(TryLockError::Error(source)) => Err(StoreError::Io {
            op: "lock",
            path: root.to_owned(),
            source,
        }),
    }
}

/// Takes the root's lock file; a refusal says which process holds it (as the file records).
fn lock_file(root: &Path) -> Result<File, StoreError> {
    let path = root.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(fsio::io_error("open", &path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // Best effort: the holder's pid is only a hint for the message.
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(StoreError::Locked {
                path,
                detail: if holder.is_empty() {
                    "held by another open store".to_owned()
                } else {
                    format!("held by process {holder}")
                },
            });
        }
        Err(TryLockError::Error(source)) => {
            return Err(StoreError::Io {
                op: "lock",
                path,
                source,
            })
        }
    }
    Ok(file)
}
