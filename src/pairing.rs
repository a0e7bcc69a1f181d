//! The pairing store: which canonical user each channel account belongs to.

pub(crate) mod table;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;

pub(crate) use table::PairingTable;

/// One channel account paired with a canonical user.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Pairing {
    /// The channel.
    pub channel: String,
    /// The account's id on that channel.
    pub channel_user: String,
    /// The canonical user id it is paired with.
    pub user: String,
}

/// A pairing store failure. Every variant names the place it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairingError {
    /// A file-system operation failed.
    #[error("pairings: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Stored pairings could not be read; they were left in place, nothing was reset.
    #[error(
        "pairings at {place} are corrupt ({detail}); they were left in place, nothing was reset"
    )]
    Corrupt {
        /// The file or key.
        place: String,
        /// What is wrong.
        detail: String,
    },
    /// The pairings were written by a newer turnstile; they are left untouched.
    #[error("pairings at {place} have schema version {found}; this turnstile reads up to {supported} (upgrade it)")]
    Schema {
        /// The file or key.
        place: String,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The backend could not be reached or did not answer in time; nothing was changed.
    #[error("{backend} pairing store is unavailable: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Why.
        detail: String,
    },
    /// The request itself is invalid (for example a bad Redis key prefix, or an id PostgreSQL
    /// cannot store).
    #[error("invalid pairing store request: {0}")]
    InvalidRequest(String),
}

/// Maps channel accounts `(channel, channel_user)` to canonical user ids. Object-safe: a
/// [`super::ChannelRouter`] holds an `Arc<dyn PairingStore>`.
///
/// Every method is atomic: a failed call leaves stored pairings as they were. An account has at
/// most one canonical user; a user may have many accounts. Ids are taken as given (callers
/// validate them); every implementation encodes them so that none can reach another's entry.
#[async_trait]
pub trait PairingStore: Send + Sync + 'static {
    /// A short name for logs (`"memory"`, `"file"`, `"redis"`, `"postgres"`).
    fn name(&self) -> &'static str;

    /// The canonical user `(channel, channel_user)` is paired with, if any.
    async fn get(&self, channel: &str, channel_user: &str) -> Result<Option<String>, PairingError>;

    /// Pairs the account with `user`, replacing any earlier pairing. Returns the user it was
    /// paired with before. Durable when it returns `Ok` (to the degree the backend promises).
    async fn put(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, PairingError>;

    /// Removes the account's pairing. Returns the user it was paired with, if any.
    async fn remove(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, PairingError>;

    /// Every account paired with `user`, ordered by channel then account.
    async fn of_user(&self, user: &str) -> Result<Vec<Pairing>, PairingError>;

    /// Removes every pairing of `user`. Returns how many were removed. Never touches another
    /// user's pairings.
    async fn remove_user(&self, user: &str) -> Result<u64, PairingError>;
}

/// Pairings in process memory: for tests, demos and the memory session store. Lost on exit.
/// Cloning is cheap and shares the pairings.
#[derive(Debug, Clone, Default)]
pub struct MemoryPairingStore {
    table: Arc<RwLock<PairingTable>>,
}

impl MemoryPairingStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl PairingStore for MemoryPairingStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn get(&self, channel: &str, channel_user: &str) -> Result<Option<String>, PairingError> {
        Ok(self
            .table
            .read()
            .get(channel, channel_user)
            .map(str::to_owned))
    }

    async fn put(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, PairingError> {
        Ok(self.table.write().put(channel, channel_user, user))
    }

    async fn remove(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, PairingError> {
        Ok(self.table.write().remove(channel, channel_user))
    }

    async fn of_user(&self, user: &str) -> Result<Vec<Pairing>, PairingError> {
        Ok(self.table.read().of_user(user))
    }

    async fn remove_user(&self, user: &str) -> Result<u64, PairingError> {
        Ok(self.table.write().remove_user(user))
    }
}
