//! The embedded default store: JSON files under one root folder, fsync'd before an append is
//! acknowledged.
//!
//! See `docs/stores.md` for the layout and the crash-safety argument. In short: each session has
//! a folder with an append-only `log.jsonl` (the source of truth, each append ending in a line
//! marked with the session's new version and the append's length and CRC-32) and a `head.json`
//! (its fold up to some point, replaced atomically every [`session::HEAD_EVERY`] appends — and
//! by an append with no events, which has no line to mark — recording how many log bytes it
//! covers); reads fold the appends past the head onto it, and an in-memory cache, bounded by
//! bytes, spares appends even that.

mod cache;
mod line;
mod listing;
mod log;
// Reached only through `crate::fuzzing`.
#[cfg(feature = "testing")]
pub(crate) mod probe;
mod root_lock;
mod session;
mod shared;

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{Mutex, OwnedMutexGuard, OwnedRwLockReadGuard, RwLock};

use self::cache::HeadCache;
use self::root_lock::{lock_root, RootLock};
use super::journal::{self, Entry, Journal};
use super::layout::{SessionPaths, TRASH_DIR};
use super::{fsio, layout, pool};
use crate::key::SessionKey;
use crate::state::{Event, Seq};
use crate::store::{
    check_page, select_for_gc, GcPolicy, GcReport, LoadedSession, Page, PageRequest, Store,
    StoreError,
};

/// Stripes of the per-user gate: held shared by every session operation, exclusively by
/// `delete_user`. Fixed, so memory stays bounded whatever the number of users.
const USER_GATES: usize = 64;
/// Stripes of the per-session write lock. Two sessions share a stripe by hash only, and an
/// append holds its stripe until the journal flush that covers it returned, so a session whose
/// stripe-mate is appending waits one more flush. With `n` sessions appending at once about
/// `n²/2` ÷ stripes pairs share one: 50 busy sessions gave about 5 pairs at 256 stripes (the
/// same pairs for the whole run, and 1.41× fewer turns/s than now, docs/BENCHMARKS.md) and give
/// about 0.3 at 4,096, for some 250 KiB per store.
const SESSION_LOCKS: usize = 4096;
/// Stripes of the lock around one user's `user.json` read-modify-write.
const USER_STATE_LOCKS: usize = 64;

/// Stores sessions as files under one root folder: the embedded default, for one process on one
/// host.
///
/// Every append is fsync'd before it returns `Ok`, and survives `kill -9` or a power cut. A root
/// is used by one process at a time: [`FileStore::open`] takes a lock file and a second opener
/// gets [`StoreError::Locked`]. Cloning is cheap and shares the store.
#[derive(Debug, Clone)]
pub struct FileStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The store's folder.
    root: PathBuf,
    /// See [`USER_GATES`].
    user_gates: Box<[Arc<RwLock<()>>]>,
    /// See [`SESSION_LOCKS`]. Owned guards travel into the blocking task, so a caller that stops
    /// waiting cannot let a second writer in while the first one's I/O still runs.
    session_locks: Box<[Arc<Mutex<()>>]>,
    /// See [`USER_STATE_LOCKS`]; taken inside blocking tasks only.
    user_state_locks: Box<[parking_lot::Mutex<()>]>,
    /// Serialises read-modify-writes of `app.json`; taken inside blocking tasks only.
    app_state_lock: parking_lot::Mutex<()>,
    /// Each recently used session's state, so that an append reads no file; see `cache.rs`.
    cache: HeadCache,
    /// A readiness probe's `stat` is on an I/O thread: set while one runs, so that a folder that
    /// hangs (a stuck network mount) costs one blocked thread, not one per probe.
    probing: std::sync::atomic::AtomicBool,
    /// Makes appends durable, many sessions' with one flush; see `journal.rs`. Declared before
    /// the lock: fields drop in order, so the journal is flushed and checkpointed while the root
    /// is still this process's.
    journal: Journal,
    /// Holds the root's locks for as long as the store lives; dropping them releases them.
    _lock: RootLock,
}

/// What a session operation holds: its user's gate (shared) and its own lock.
type SessionGuards = (OwnedRwLockReadGuard<()>, OwnedMutexGuard<()>);

impl FileStore {
    /// Opens (creating if needed) the store at `root` and locks it against other processes.
    ///
    /// Blocking: it creates folders and takes a file lock, so call it at start-up (or from
    /// `spawn_blocking`). Fails with [`StoreError::Locked`] when another process — or another
    /// `FileStore` in this one — has the root open.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(fsio::io_error("create folder", &root))?;
        let lock = lock_root(&root)?;
        fsio::empty_trash(&root.join(TRASH_DIR))?;
        // Before anything reads a session: what a crash left in the journal is written back.
        let journal = Journal::open(&root)?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                journal,
                _lock: lock,
                user_gates: (0..USER_GATES).map(|_| Arc::new(RwLock::new(()))).collect(),
                session_locks: (0..SESSION_LOCKS)
                    .map(|_| Arc::new(Mutex::new(())))
                    .collect(),
                user_state_locks: (0..USER_STATE_LOCKS)
                    .map(|_| parking_lot::Mutex::new(()))
                    .collect(),
                app_state_lock: parking_lot::Mutex::new(()),
                cache: HeadCache::new(),
                probing: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// Opens the store at the default root: `$TURNSTILE_HOME` if set, else
    /// `$XDG_DATA_HOME/turnstile`, else `$HOME/.local/share/turnstile`.
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(Self::default_root()?)
    }

    /// The default root (the data folder), without opening it: `$TURNSTILE_HOME` if set, else
    /// `$XDG_DATA_HOME/turnstile`, else `$HOME/.local/share/turnstile`.
    pub fn default_root() -> Result<PathBuf, StoreError> {
        layout::default_root(|name| std::env::var_os(name)).ok_or_else(|| {
            StoreError::InvalidRequest(
                "no store root: set TURNSTILE_HOME (or XDG_DATA_HOME or HOME)".to_owned(),
            )
        })
    }

    /// The folder this store keeps its files in.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Writes to the session files every change the journal made durable and has not yet
    /// written there. While the store runs, a session's `log.jsonl` and `head.json` may lag
    /// behind what it acknowledged by up to half a second (the journal holds the rest, and every
    /// read through the store sees it); call this before looking at the files of an open store
    /// from outside it. Dropping the store does the same, and flushes them.
    pub async fn settle_files(&self) -> Result<(), StoreError> {
        let inner = self.inner.clone();
        blocking(move || inner.journal.settle_all()).await
    }

    async fn lock(&self, key: &SessionKey) -> SessionGuards {
        let gate = self.inner.user_gate(key.user_id()).read_owned().await;
        let index = stripe(key, SESSION_LOCKS);
        let session = self.inner.session_locks[index].clone().lock_owned().await;
        (gate, session)
    }
}

/// Which of `stripes` locks guards `value`.
fn stripe(value: &impl std::hash::Hash, stripes: usize) -> usize {
    // A fixed hasher: stripes only spread contention, so predictability costs nothing.
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(value);
    (hash % stripes as u64) as usize
}

impl Inner {
    fn user_gate(&self, user_id: &str) -> Arc<RwLock<()>> {
        self.user_gates[stripe(&user_id, USER_GATES)].clone()
    }

    fn trash(&self) -> PathBuf {
        self.root.join(TRASH_DIR)
    }
}

/// Runs blocking file I/O on the file kit's I/O threads (`pool.rs`).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    pool::run(work).await.unwrap_or_else(|detail| {
        Err(StoreError::Unavailable {
            backend: "file",
            detail,
        })
    })
}

/// Runs `work` as a task of its own and waits for it: a caller that stops waiting does not stop
/// it, so locks it holds are released only once its writes are settled (journaled or refused),
/// never between an append's journal entries.
async fn detached<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::spawn(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(StoreError::Unavailable {
            backend: "file",
            detail: format!("the write task did not run: {e}"),
        }),
    }
}

impl Inner {
    /// Removes `dir` once its journaled removal is durable. If the folder cannot be removed, the
    /// journal stops: a replay would remove it later, with whatever was written there since.
    fn remove_journaled(&self, dir: &Path) -> Result<bool, StoreError> {
        fsio::remove_dir(dir, &self.trash()).inspect_err(|e| {
            self.journal.halt(format!(
                "{} was journaled as removed but could not be removed: {e}",
                dir.display()
            ));
        })
    }

    /// The journal entry that removes `dir` (a folder under the root).
    fn removal(&self, dir: &Path) -> Result<Entry, StoreError> {
        let path = dir.strip_prefix(&self.root).map_err(|_| {
            StoreError::InvalidRequest(format!("{} is outside the store's root", dir.display()))
        })?;
        Ok(Entry::Remove {
            path: path.to_owned(),
        })
    }
}

#[async_trait]
impl Store for FileStore {
    fn name(&self) -> &'static str {
        "file"
    }

    /// The root folder is still there and a folder: one `stat`, on the blocking pool, and never
    /// two at once (one still running answers `Unavailable`).
    async fn ping(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        if self.inner.probing.swap(true, Ordering::AcqRel) {
            return Err(StoreError::Unavailable {
                backend: "file",
                detail: "the last look at the store's folder has not finished".into(),
            });
        }
        let inner = self.inner.clone();
        blocking(move || {
            let seen = match std::fs::metadata(&inner.root) {
                Ok(meta) if meta.is_dir() => Ok(()),
                Ok(_) => Err(StoreError::Unavailable {
                    backend: "file",
                    detail: format!("{} is no longer a folder", inner.root.display()),
                }),
                Err(error) => Err(fsio::io_error("read", &inner.root)(error)),
            };
            inner.probing.store(false, Ordering::Release);
            seen
        })
        .await
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let guards = self.lock(key).await;
        let (inner, key) = (self.inner.clone(), key.clone());
        blocking(move || {
            let _guards = guards;
            let paths = SessionPaths::of(&inner.root, &key);
            inner.journal.settle(&paths.dir)?;
            let current = inner.cache.current(&paths, &key)?;
            let events = match &current.record {
                Some(record) => {
                    log::read_tail(&paths, &key, current.log_end, record.next_seq, window)?
                }
                None => {
                    // Its first append will not look at the files again, so what it would
                    // have checked before writing them is checked here.
                    if current.log_len == 0
                        && layout::refuse_links(&inner.root, &[&paths.log, &paths.head]).is_ok()
                    {
                        inner.cache.remember_absent(&key, current.clone());
                    }
                    Vec::new()
                }
            };
            let (user_state, app_state) = inner.shared_state(&key)?;
            Ok(LoadedSession {
                record: current.record,
                events,
                user_state,
                app_state,
            })
        })
        .await
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        let guards = self.lock(key).await;
        let (inner, key, events) = (self.inner.clone(), key.clone(), events.to_vec());
        detached(async move {
            let _guards = guards;
            inner.append(key, base_version, events).await
        })
        .await
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let guards = self.lock(key).await;
        let (inner, key) = (self.inner.clone(), key.clone());
        blocking(move || {
            let _guards = guards;
            let paths = SessionPaths::of(&inner.root, &key);
            inner.journal.settle(&paths.dir)?;
            let current = inner.cache.current(&paths, &key)?;
            let next_seq = current.record.as_ref().map_or(1, |r| r.next_seq);
            log::scan(&paths, &key, current.log_end, next_seq, from, limit)
        })
        .await
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        let guards = self.lock(key).await;
        let (inner, key) = (self.inner.clone(), key.clone());
        detached(async move {
            let _guards = guards;
            let paths = SessionPaths::of(&inner.root, &key);
            {
                // A session the journal knows and its files not yet: its folder is made, so
                // that what is removed (and reported) is what exists.
                let (inner, dir) = (inner.clone(), paths.dir.clone());
                blocking(move || inner.journal.settle(&dir)).await?;
            }
            // Journaled first, so that a replay after a crash never writes the session back.
            inner.journal.commit(inner.removal(&paths.dir)?).await?;
            blocking(move || {
                inner.journal.discard_under(&paths.dir);
                let removed = inner.remove_journaled(&paths.dir);
                inner.cache.forget(&key);
                removed
            })
            .await
        })
        .await
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        check_page(page)?;
        let (inner, user_id, page) = (self.inner.clone(), user_id.to_owned(), page.clone());
        blocking(move || {
            // The walk finds sessions by their folders: those the journal holds first.
            inner.journal.settle_all()?;
            listing::list(&inner.root, &inner.cache, &user_id, &page)
        })
        .await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        // Exclusive: no operation on any of this user's sessions runs meanwhile.
        let gate = self.inner.user_gate(user_id).write_owned().await;
        let (inner, user_id) = (self.inner.clone(), user_id.to_owned());
        detached(async move {
            let _gate = gate;
            let user_dir = layout::user_dir(&inner.root, &user_id);
            {
                // Sessions are counted by their folders: those the journal holds first.
                let inner = inner.clone();
                blocking(move || inner.journal.settle_all()).await?;
            }
            // Journaled first, so that a replay after a crash never writes the user back.
            inner.journal.commit(inner.removal(&user_dir)?).await?;
            let count = {
                let inner = inner.clone();
                blocking(move || {
                    let sessions = layout::sessions_dir(&inner.root, &user_id);
                    let count = listing::session_dirs(&sessions)?
                        .into_iter()
                        .filter(|(_, dir)| {
                            dir.join(layout::HEAD_FILE).exists()
                                || dir.join(layout::LOG_FILE).exists()
                        })
                        .count() as u64;
                    inner.journal.discard_under(&user_dir);
                    let removed = inner.remove_journaled(&user_dir);
                    inner.cache.forget_user(&user_id);
                    removed.map(|_| count)
                })
                .await?
            };
            // The user's folder will hold a new `user.json`, written without the journal: the
            // removal must leave the journal before that, or a replay would remove it too.
            inner.journal.checkpoint().await?;
            Ok(count)
        })
        .await
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        let inner = self.inner.clone();
        let scanned: HashMap<SessionKey, u64> = blocking(move || {
            inner.journal.settle_all()?;
            listing::scan_updated(&inner.root, &inner.cache)
        })
        .await?;
        let candidates = scanned.iter().map(|(k, u)| (k.clone(), *u)).collect();
        let mut removed = Vec::new();
        for key in select_for_gc(candidates, policy, now_ms) {
            let guards = self.lock(&key).await;
            let (inner, seen) = (self.inner.clone(), scanned.get(&key).copied());
            let key2 = key.clone();
            let gone = detached(async move {
                let _guards = guards;
                let paths = SessionPaths::of(&inner.root, &key2);
                // Skip a session written since the scan: it is no longer what gc chose.
                let still = {
                    let (inner, paths, key2) = (inner.clone(), paths.clone(), key2.clone());
                    blocking(move || {
                        inner.journal.settle(&paths.dir)?;
                        Ok(listing::updated_ms(&inner.cache, &paths, &key2) == seen)
                    })
                    .await?
                };
                if !still {
                    return Ok(false);
                }
                inner.journal.commit(inner.removal(&paths.dir)?).await?;
                blocking(move || {
                    inner.journal.discard_under(&paths.dir);
                    let removed = inner.remove_journaled(&paths.dir);
                    inner.cache.forget(&key2);
                    removed
                })
                .await
            })
            .await?;
            if gone {
                removed.push(key);
            }
        }
        Ok(GcReport { removed })
    }
}
