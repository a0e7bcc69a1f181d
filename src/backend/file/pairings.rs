//! Pairings in one JSON file in the file store's root, rewritten whole by temp file + fsync +
//! rename on every change.
//!
//! Pairings change rarely (a person links an account) and are read on every channel message, so
//! the table is held in memory and read without I/O; a change writes the whole table, which is
//! small (one line per linked account). The file store's root lock keeps other processes out,
//! so the in-memory table is always the file's content.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::RwLock;
use serde_json::{Map, Value};

use super::FileStore;
use crate::atomic_file::{read_optional, write_atomic};
use crate::pairing::table::{Document, PairingTable};
use crate::pairing::{Pairing, PairingError, PairingStore};

/// The pairings file's name, in the file store's root.
pub const PAIRINGS_FILE: &str = "pairings.json";

/// Pairings persisted in [`PAIRINGS_FILE`] in a [`FileStore`]'s root: the pairing store that
/// goes with the file session store. Every change is fsync'd before it returns `Ok`. Cloning is
/// cheap and shares the store.
#[derive(Debug, Clone)]
pub struct FilePairingStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// Holds the root's lock for as long as the pairings are in use: no other process writes
    /// this file meanwhile.
    _store: FileStore,
    /// What the file holds. Swapped whole after each durable write, so readers never wait on
    /// I/O and never see a change that is not on disk.
    table: RwLock<Arc<PairingTable>>,
    /// Top-level fields of the file this build does not know; written back unchanged.
    extra: Map<String, Value>,
    /// One change at a time: each writes the table its predecessor left.
    writer: tokio::sync::Mutex<()>,
}

impl FilePairingStore {
    /// Opens the pairings of `store` (an empty table when the file does not exist yet).
    ///
    /// Blocking: it reads the file, so call it at start-up. A corrupt file is
    /// [`PairingError::Corrupt`] and a newer one [`PairingError::Schema`]; neither is ever
    /// treated as empty.
    pub fn open(store: &FileStore) -> Result<Self, PairingError> {
        let path = store.root().join(PAIRINGS_FILE);
        let (table, extra) = match read_optional(&path).map_err(io_error("read", &path))? {
            None => (PairingTable::default(), Map::new()),
            Some(bytes) => {
                let place = path.display().to_string();
                let document: Document =
                    serde_json::from_slice(&bytes).map_err(|e| PairingError::Corrupt {
                        place: place.clone(),
                        detail: e.to_string(),
                    })?;
                PairingTable::from_document(document, &place)?
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                _store: store.clone(),
                table: RwLock::new(Arc::new(table)),
                extra,
                writer: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The file the pairings are kept in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn snapshot(&self) -> Arc<PairingTable> {
        self.inner.table.read().clone()
    }

    /// Applies `change` to a copy of the table, writes it durably, then publishes it. `change`
    /// returns its answer and whether it changed anything (no write otherwise).
    ///
    /// Runs as its own task so that a caller who stops waiting (a dropped HTTP request) cannot
    /// leave the file changed and the table not.
    async fn update<R: Send + 'static>(
        &self,
        change: impl FnOnce(&mut PairingTable) -> (R, bool) + Send + 'static,
    ) -> Result<R, PairingError> {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            let _writer = inner.writer.lock().await;
            let mut next = PairingTable::clone(&inner.table.read());
            let (answer, changed) = change(&mut next);
            if !changed {
                return Ok(answer);
            }
            let bytes = serde_json::to_vec_pretty(&next.to_document(&inner.extra))
                .map_err(|e| PairingError::InvalidRequest(format!("cannot encode: {e}")))?;
            let path = inner.path.clone();
            let written = super::pool::run(move || write_atomic(&path, &bytes))
                .await
                .map_err(unavailable)?;
            match written {
                Ok(()) => {
                    *inner.table.write() = Arc::new(next);
                    Ok(answer)
                }
                Err(failed) => {
                    if failed.replaced {
                        // The file holds the new table: so must memory, or the next write
                        // would quietly revert this change.
                        *inner.table.write() = Arc::new(next);
                    }
                    Err(io_error("write", &inner.path)(failed.source))
                }
            }
        });
        task.await
            .map_err(|e| unavailable(format!("the update task did not finish: {e}")))?
    }
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> PairingError {
    let path = path.to_path_buf();
    move |source| PairingError::Io { op, path, source }
}

fn unavailable(detail: String) -> PairingError {
    PairingError::Unavailable {
        backend: "file",
        detail,
    }
}

#[async_trait]
impl PairingStore for FilePairingStore {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn get(&self, channel: &str, channel_user: &str) -> Result<Option<String>, PairingError> {
        Ok(self
            .snapshot()
            .get(channel, channel_user)
            .map(str::to_owned))
    }

    async fn put(
        &self,
        channel: &str,
        channel_user: &str,
        user: &str,
    ) -> Result<Option<String>, PairingError> {
        let (channel, channel_user, user) =
            (channel.to_owned(), channel_user.to_owned(), user.to_owned());
        self.update(move |table| {
            let old = table.put(&channel, &channel_user, &user);
            let changed = old.as_deref() != Some(user.as_str());
            (old, changed)
        })
        .await
    }

    async fn remove(
        &self,
        channel: &str,
        channel_user: &str,
    ) -> Result<Option<String>, PairingError> {
        let (channel, channel_user) = (channel.to_owned(), channel_user.to_owned());
        self.update(move |table| {
            let old = table.remove(&channel, &channel_user);
            let changed = old.is_some();
            (old, changed)
        })
        .await
    }

    async fn of_user(&self, user: &str) -> Result<Vec<Pairing>, PairingError> {
        Ok(self.snapshot().of_user(user))
    }

    async fn remove_user(&self, user: &str) -> Result<u64, PairingError> {
        let user = user.to_owned();
        self.update(move |table| {
            let removed = table.remove_user(&user);
            (removed, removed > 0)
        })
        .await
    }
}
