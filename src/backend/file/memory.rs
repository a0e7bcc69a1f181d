//! [`FileMemory`]: memory entries in a folder, one append-only log per user, searched through
//! an in-process index built when the user's log is first read.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use lru::LruCache;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::key::SessionKey;
use crate::memory::{
    check_search, prepare, MemoryEntry, MemoryError, MemoryHit, MemoryStore, UserIndex,
};
use crate::state::Seq;

mod log;

/// Users whose index is held in memory at once; the least recently used is dropped past it (and
/// read again from its log when needed). A user's index of 100,000 entries is tens of MB, so 64
/// bounds the store's memory while keeping the active users' searches in memory.
pub const MAX_LOADED_USERS: usize = 64;

/// Keeps each user's memory in `ROOT/<sha256 of the user id>.jsonl`.
///
/// The file name is a digest, so no user id — however hostile — can name a path outside the
/// folder or collide with another user's file; each line also carries its user id, and a line
/// of another user makes the log corrupt rather than readable. One process at a time may use a
/// folder — the indexes it holds are not refreshed from writes made by others — so opening it
/// takes a lock (`turnstile-memory.lock`), and a second opener is refused with
/// [`MemoryError::Locked`] until the first store is dropped.
#[derive(Debug, Clone)]
pub struct FileMemory {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    slots: Mutex<Slots>,
    /// Held for as long as the store lives; dropping it releases the folder.
    _lock: std::fs::File,
}

/// The file whose lock marks a memory folder in use.
const LOCK_FILE: &str = "turnstile-memory.lock";

/// Locks `root` against other openers.
fn lock_root(root: &Path) -> Result<std::fs::File, MemoryError> {
    let path = root.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| MemoryError::Io {
            op: "open",
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(MemoryError::Locked {
            path: root.to_owned(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(MemoryError::Io {
            op: "lock",
            path,
            source,
        }),
    }
}

/// Per-user locks, and which users' indexes are loaded.
#[derive(Debug)]
struct Slots {
    map: HashMap<String, Arc<Mutex<Slot>>>,
    loaded: LruCache<String, ()>,
}

/// One user's index, once read. `None` until read, after a failure (it is read again), or once
/// dropped from the cache.
#[derive(Debug, Default)]
struct Slot {
    index: Option<UserIndex>,
}

impl Slot {
    fn index(&mut self, path: &Path, user: &str) -> Result<&mut UserIndex, MemoryError> {
        if self.index.is_none() {
            self.index = Some(log::load(path, user)?);
        }
        Ok(self.index.get_or_insert_with(UserIndex::new))
    }
}

impl FileMemory {
    /// Opens (creating if needed) the memory folder at `root` and locks it against other
    /// openers ([`MemoryError::Locked`]).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, MemoryError> {
        let root = root.into();
        log::create_root(&root)?;
        let lock = lock_root(&root)?;
        let capacity = NonZeroUsize::new(MAX_LOADED_USERS).expect("MAX_LOADED_USERS is positive");
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                slots: Mutex::new(Slots {
                    map: HashMap::new(),
                    loaded: LruCache::new(capacity),
                }),
                _lock: lock,
            }),
        })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The log file of `user_id`: a digest of the id, so always a plain name in the folder.
    pub fn path_of(&self, user_id: &str) -> PathBuf {
        let digest = Sha256::digest(user_id.as_bytes());
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.inner.root.join(format!("{name}.jsonl"))
    }

    /// Runs `work` on the file kit's I/O threads holding `user`'s slot alone.
    async fn with_user<T, F>(&self, user: &str, work: F) -> Result<T, MemoryError>
    where
        T: Send + 'static,
        F: FnOnce(&Path, &str, &mut Slot) -> Result<T, MemoryError> + Send + 'static,
    {
        let (this, user, path) = (self.clone(), user.to_owned(), self.path_of(user));
        super::pool::run(move || {
            let slot = this
                .inner
                .slots
                .lock()
                .map
                .entry(user.clone())
                .or_default()
                .clone();
            let result = work(&path, &user, &mut slot.lock());
            drop(slot);
            this.touch(user);
            result
        })
        .await
        .map_err(|detail| MemoryError::Unavailable {
            backend: "file",
            detail,
        })?
    }

    /// Marks `user` as recently used, and drops the indexes of users past the cache's size.
    fn touch(&self, user: String) {
        let mut slots = self.inner.slots.lock();
        // `get` marks a known user as the most recent; only a new one may push another out.
        if slots.loaded.get(&user).is_some() {
            return;
        }
        let Some((old, ())) = slots.loaded.push(user, ()) else {
            return;
        };
        if let Some(slot) = slots.map.get(&old).cloned() {
            // A slot in use keeps its index: its user is being served right now.
            if let Some(mut held) = slot.try_lock() {
                held.index = None;
            }
            if Arc::strong_count(&slot) == 2 {
                slots.map.remove(&old);
            }
        }
    }
}

#[async_trait]
impl MemoryStore for FileMemory {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn ingest(&self, entries: &[MemoryEntry]) -> Result<usize, MemoryError> {
        let entries = prepare(entries)?;
        let mut by_user: HashMap<String, Vec<MemoryEntry>> = HashMap::new();
        for entry in entries {
            by_user
                .entry(entry.key.user_id().to_owned())
                .or_default()
                .push(entry);
        }
        let mut added = 0;
        for (user, entries) in by_user {
            added += self
                .with_user(&user, move |path, user, slot| {
                    ingest_one(path, user, slot, entries)
                })
                .await?;
        }
        Ok(added)
    }

    async fn ingested_through(&self, key: &SessionKey) -> Result<Seq, MemoryError> {
        let owned = key.clone();
        self.with_user(key.user_id(), move |path, user, slot| {
            let key = owned;
            Ok(slot.index(path, user)?.mark(&key))
        })
        .await
    }

    async fn search(
        &self,
        user_id: &str,
        query: &str,
        k: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let terms = check_search(query, k)?;
        self.with_user(user_id, move |path, user, slot| {
            Ok(slot.index(path, user)?.search(&terms, k))
        })
        .await
    }

    async fn delete_session(&self, key: &SessionKey) -> Result<u64, MemoryError> {
        let owned = key.clone();
        self.with_user(key.user_id(), move |path, user, slot| {
            let key = owned;
            let index = slot.index(path, user)?;
            let had_mark = index.mark(&key) > 0;
            let removed = index.remove_session(&key);
            if removed > 0 || had_mark {
                let written = log::rewrite(path, index);
                if written.is_err() {
                    slot.index = None;
                }
                written?;
            }
            Ok(removed)
        })
        .await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, MemoryError> {
        self.with_user(user_id, |path, user, slot| {
            // A corrupt log is still removed: deleting is how a user's data goes, readable or not.
            let held = slot.index(path, user).map_or(0, |index| index.len() as u64);
            slot.index = None;
            log::remove(path)?;
            slot.index = Some(UserIndex::new());
            Ok(held)
        })
        .await
    }
}

/// Appends one user's new entries, then indexes them; rewrites the log if the bound made the
/// index forget its oldest entries.
fn ingest_one(
    path: &Path,
    user: &str,
    slot: &mut Slot,
    entries: Vec<MemoryEntry>,
) -> Result<usize, MemoryError> {
    let fresh = {
        let index = slot.index(path, user)?;
        let mut seen = HashSet::new();
        entries
            .into_iter()
            .filter(|e| !index.contains(&e.key, e.seq) && seen.insert((e.key.clone(), e.seq)))
            .collect::<Vec<_>>()
    };
    if fresh.is_empty() {
        return Ok(0);
    }
    if let Err(err) = log::append(path, &fresh) {
        // The file may hold part of the append: read it again (and cut a torn tail) next time.
        slot.index = None;
        return Err(err);
    }
    let added = fresh.len();
    let index = slot.index(path, user)?;
    for entry in fresh {
        index.insert(entry);
    }
    if !index.forget_oldest().is_empty() {
        let written = log::rewrite(path, index);
        if written.is_err() {
            slot.index = None;
        }
        written?;
    }
    Ok(added)
}
