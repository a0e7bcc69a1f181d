//! [`StoreError`]: what a store answers when it fails, each variant naming the session or place
//! it concerns.

use std::time::Duration;

use super::lease::Owner;
use crate::key::SessionKey;
use crate::state::SchemaError;

/// A store failure. Every variant names the session or place it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Compare-and-set refused: the stored version is not the one the write was based on.
    /// Another writer got there first; reload the session and try again.
    #[error("session {key}: stored version is {found}, the write was based on {expected}; another writer changed it (reload and retry)")]
    Conflict {
        /// The session.
        key: SessionKey,
        /// The version the write was based on.
        expected: u64,
        /// The version in the store.
        found: u64,
    },
    /// Stored data was written by a newer turnstile; it is left untouched.
    #[error("session {key}: {source}")]
    Schema {
        /// The session.
        key: SessionKey,
        /// What was wrong.
        #[source]
        source: SchemaError,
    },
    /// Stored data could not be read; it is left in place for inspection.
    #[error(
        "session {key}: stored data is corrupt ({detail}); it was left in place, nothing was reset"
    )]
    Corrupt {
        /// The session (or other record, such as a user's state).
        key: String,
        /// What is wrong, where.
        detail: String,
    },
    /// The backend could not be reached or did not answer in time; nothing was acknowledged.
    #[error("{backend} store is unavailable: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Why.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store's own layout (tables, folders) was set up by a newer turnstile; nothing was
    /// read or changed. Upgrade turnstile, or point it at another database or schema.
    #[error("{backend} store, {place}: layout version {found} is newer than this build supports ({supported}); upgrade turnstile to use it")]
    NewerLayout {
        /// Which backend.
        backend: &'static str,
        /// Where (a database schema, a folder).
        place: String,
        /// The layout version found.
        found: u32,
        /// The newest this build knows.
        supported: u32,
    },
    /// Another process holds the store's lock.
    #[error("the store at {path} is locked by another process ({detail})")]
    Locked {
        /// The lock file.
        path: std::path::PathBuf,
        /// Who holds it, if known.
        detail: String,
    },
    /// The request itself is invalid (for example a bad cursor or page size).
    #[error("invalid store request: {0}")]
    InvalidRequest(String),
    /// A fenced write was refused: the writer does not hold the session's lease (it expired, or
    /// another process holds it now). Nothing was written.
    #[error("session {key}: this process does not hold the session's lease{}; nothing was written", owner.as_ref().map(|o| format!(" (held by {} at epoch {})", o.address, o.epoch)).unwrap_or_default())]
    NotOwner {
        /// The session.
        key: SessionKey,
        /// Who holds the lease now, if anyone.
        owner: Option<Owner>,
    },
    /// A fenced write was refused: a writer with a newer lease epoch has written the session
    /// since this writer's lease was granted. Nothing was written.
    #[error("session {key}: fenced; the write carries lease epoch {epoch} but epoch {current} has written since; nothing was written")]
    Fenced {
        /// The session.
        key: SessionKey,
        /// The epoch the refused write carried.
        epoch: u64,
        /// The newest epoch that has written the session.
        current: u64,
    },
    /// The append **committed on the primary** (as `version`), but fewer replicas than the
    /// store requires confirmed it within the timeout, so it is not acknowledged: a failover
    /// before they catch up may lose it. It is kept — never written again, and the next append
    /// builds on it — so do not resend it as new input. Check the replicas' health, or lower
    /// the store's `replicas` setting.
    #[error("session {key}: the write is stored on the primary as version {version}, but only {acked} of the {wanted} replicas required confirmed it within {timeout:?}, so it is not acknowledged: it may be lost if the primary fails over before they catch up; it is kept (do not send it again) — check the replicas, or lower `replicas`")]
    NotReplicated {
        /// The session.
        key: SessionKey,
        /// The version the append committed as on the primary.
        version: u64,
        /// Replicas that confirmed the write in time.
        acked: u32,
        /// Replicas required.
        wanted: u32,
        /// How long the append waited for them.
        timeout: Duration,
    },
}

impl StoreError {
    /// Whether the store failed because of its environment rather than a bug or bad data: the
    /// backend is down or locked, or a file operation met a full disk, a read-only or failing
    /// device, or missing permissions. Nothing was acknowledged, and the same request may
    /// succeed once the environment is mended.
    pub fn is_environmental(&self) -> bool {
        match self {
            Self::Unavailable { .. } | Self::Locked { .. } => true,
            Self::Io { source, .. } => io_is_environmental(source),
            _ => false,
        }
    }
}

/// Whether an I/O error comes from the machine (disk full, read-only, failing device,
/// permissions) rather than from what turnstile asked of it.
fn io_is_environmental(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    /// EPERM, EIO, EACCES, ENOSPC, EROFS, EDQUOT (Linux numbers).
    const CODES: [i32; 6] = [1, 5, 13, 28, 30, 122];
    matches!(
        error.kind(),
        ErrorKind::PermissionDenied
            | ErrorKind::ReadOnlyFilesystem
            | ErrorKind::StorageFull
            | ErrorKind::QuotaExceeded
    ) || error
        .raw_os_error()
        .is_some_and(|code| CODES.contains(&code))
}
