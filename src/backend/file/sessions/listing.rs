//! Walking a root's folders: a user's sessions for `list`, every session for `gc`. Neither takes
//! session locks, so both read only complete files, skip sessions deleted meanwhile, and read a
//! session again once when the first read fails (see [`peek_current`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::cache::HeadCache;
use super::fsio;
use super::layout::{self, SessionPaths};
use super::log::{self, Current};
use crate::key::SessionKey;
use crate::store::{Page, PageRequest, SessionMeta, StoreError};

/// The session folders in a user's `sessions` folder, by folder name.
pub(super) fn session_dirs(sessions: &Path) -> Result<Vec<(String, PathBuf)>, StoreError> {
    let entries = match std::fs::read_dir(sessions) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fsio::io_error("list", sessions)(e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(fsio::io_error("list", sessions))?;
        // Names the encoder made are ASCII; anything else is not ours.
        if let Ok(name) = entry.file_name().into_string() {
            dirs.push((name, entry.path()));
        }
    }
    Ok(dirs)
}

/// One page of a user's sessions, ordered by session id.
pub(super) fn list(
    root: &Path,
    cache: &HeadCache,
    user_id: &str,
    page: &PageRequest,
) -> Result<Page, StoreError> {
    let mut ids: Vec<(String, PathBuf)> = Vec::new();
    for (name, dir) in session_dirs(&layout::sessions_dir(root, user_id))? {
        let id = layout::decode_name(&name).or_else(|| {
            log::stored_key(&SessionPaths::in_dir(dir.clone()))
                .filter(|k| k.user_id() == user_id)
                .map(|k| k.session_id().to_owned())
                .filter(|id| layout::encode_name(id) == name)
        });
        if let Some(id) = id.filter(|id| page.cursor.as_deref().is_none_or(|c| id.as_str() > c)) {
            ids.push((id, dir));
        }
    }
    ids.sort();
    let mut sessions = Vec::with_capacity(page.limit + 1);
    for (id, dir) in ids {
        let key = if user_id.is_empty() {
            SessionKey::anonymous(id)
        } else {
            SessionKey::new(user_id, id)
        };
        let Ok(key) = key else { continue };
        let paths = SessionPaths::in_dir(dir);
        match peek_current(cache, &paths, &key) {
            Ok(current) => sessions.extend(current.record.as_ref().map(SessionMeta::of)),
            // A session deleted meanwhile is simply not listed.
            Err(_) if !paths.dir.exists() => {}
            Err(e) => return Err(e),
        }
        if sessions.len() > page.limit {
            break;
        }
    }
    let next_cursor = (sessions.len() > page.limit).then(|| {
        sessions.truncate(page.limit);
        sessions.last().map(|m| m.key.session_id().to_owned())
    });
    Ok(Page {
        sessions,
        next_cursor: next_cursor.flatten(),
    })
}

/// A session's state for a reader that holds no lock: [`HeadCache::peek_current`], tried a
/// second time if the first attempt fails while the session's folder still exists.
///
/// An append running meanwhile can cut an unfinished tail and write after it while the log is
/// being read, so one read may see old and new bytes mixed, which looks like damage. Such a race
/// needs an append that finds an unfinished tail (after a crash or a failed write), so a second
/// read settles it; an error that comes back is real.
fn peek_current(
    cache: &HeadCache,
    paths: &SessionPaths,
    key: &SessionKey,
) -> Result<Current, StoreError> {
    twice_if_present(paths, key, || cache.peek_current(paths, key))
}

/// Runs `read`, and once more if it fails while the session's folder still exists.
fn twice_if_present<T>(
    paths: &SessionPaths,
    key: &SessionKey,
    mut read: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match read() {
        Err(e) if paths.dir.exists() => {
            tracing::debug!(session = %key, error = %e, "reading the session again");
            read()
        }
        other => other,
    }
}

/// A session's last update time with the appends past its head folded in, or `None` when it
/// cannot be read (`gc` leaves such sessions alone, with a warning unless it was deleted).
pub(super) fn updated_ms(cache: &HeadCache, paths: &SessionPaths, key: &SessionKey) -> Option<u64> {
    match peek_current(cache, paths, key) {
        Ok(current) => current.record.map(|r| r.updated_ms),
        Err(_) if !paths.dir.exists() => None,
        Err(e) => {
            tracing::warn!(session = %key, error = %e, "gc leaves a session it cannot read alone");
            None
        }
    }
}

/// Every stored session with its last update time. A session is found by its head, and only a
/// head whose key maps back to its own folder is trusted.
pub(super) fn scan_updated(
    root: &Path,
    cache: &HeadCache,
) -> Result<HashMap<SessionKey, u64>, StoreError> {
    let mut out = HashMap::new();
    let users = layout::all_user_dirs(root).map_err(fsio::io_error("list", root))?;
    for user in users {
        for (_, dir) in session_dirs(&user.join(layout::SESSIONS_DIR))? {
            let paths = SessionPaths::in_dir(dir);
            let Some(key) = log::stored_key(&paths) else {
                continue;
            };
            if SessionPaths::of(root, &key).dir != paths.dir {
                continue;
            }
            if let Some(updated) = updated_ms(cache, &paths, &key) {
                out.insert(key, updated);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn damaged(key: &SessionKey) -> StoreError {
        StoreError::Corrupt {
            key: key.to_string(),
            detail: "mixed bytes".to_owned(),
        }
    }

    /// Runs [`twice_if_present`] with a read that fails `failures` times, then succeeds;
    /// returns the result and how many reads were made.
    fn run(present: bool, failures: u32) -> (Result<u32, StoreError>, u32) {
        let dir = tempfile::tempdir().unwrap();
        let paths = SessionPaths::in_dir(dir.path().join("s"));
        if present {
            std::fs::create_dir(&paths.dir).unwrap();
        }
        let key = SessionKey::new("u", "s").unwrap();
        let mut reads = 0;
        let result = twice_if_present(&paths, &key, || {
            reads += 1;
            if reads <= failures {
                Err(damaged(&key))
            } else {
                Ok(reads)
            }
        });
        (result, reads)
    }

    #[test]
    fn a_failed_read_of_a_present_session_is_tried_once_more() {
        assert_eq!(run(true, 0).0.unwrap(), 1);
        assert_eq!(
            run(true, 1).0.unwrap(),
            2,
            "a race settles on the second read"
        );
        let (again, reads) = run(true, 2);
        assert!(
            matches!(again, Err(StoreError::Corrupt { .. })),
            "real damage stays an error"
        );
        assert_eq!(reads, 2, "only once more");
    }

    #[test]
    fn a_session_deleted_meanwhile_is_not_read_again() {
        let (result, reads) = run(false, 1);
        assert!(result.is_err());
        assert_eq!(reads, 1);
    }
}
