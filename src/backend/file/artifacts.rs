//! Artifacts as files under one folder: one file per version, written atomically.
//!
//! Layout (every id and name encoded by the file store's encoder, so none can leave its folder,
//! hold `.`, `/` or upper case, or collide with another):
//!
//! ```text
//! ROOT/turnstile-artifacts.lock
//! ROOT/users/<user>/user/<name>/<version>.art          a user's own artifacts
//! ROOT/users/<user>/sessions/<session>/<name>/<version>.art
//! ROOT/anonymous/<session>/<name>/<version>.art
//! ROOT/trash/                                           deleted folders, removed at once
//! ```
//!
//! A version file is one JSON line ([`ArtifactMeta`] without the size) and then the bytes. It
//! is written to a temporary beside it, fsync'd, renamed into place and its folder fsync'd, so a
//! crash leaves a version whole or absent. Files are opened with `O_NOFOLLOW`: a symbolic link
//! planted in place of a version is refused, never followed out of the root.

mod disk;

use std::fs::{File, TryLockError};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::layout::encode_name;
use crate::artifact::{
    check_save, check_scope, validate_name, Artifact, ArtifactError, ArtifactMeta, ArtifactScope,
    ArtifactStore, DEFAULT_MAX_BYTES,
};
use crate::key::{validate_id, KeyPart};

/// Stripes of the per-user write lock: every save and delete of one user's artifacts runs
/// under it, so that a version number is never handed out twice and a delete never races a
/// save into a folder being removed. Fixed, so memory stays bounded whatever the number of
/// users.
const USER_LOCKS: usize = 64;

/// The lock file that keeps a second process out of an artifact folder.
const LOCK_FILE: &str = "turnstile-artifacts.lock";

/// Keeps artifacts as files under one folder, for one process on one host.
///
/// Every save is fsync'd before it returns. [`FileArtifactStore::open`] locks the folder
/// against other processes. Cloning is cheap and shares the store.
#[derive(Debug, Clone)]
pub struct FileArtifactStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The folder.
    root: PathBuf,
    /// Held for as long as the store lives; dropping it releases the folder.
    _lock: File,
    /// See [`USER_LOCKS`].
    locks: Box<[Arc<Mutex<()>>]>,
    /// See [`ArtifactStore::max_bytes`].
    max_bytes: u64,
}

impl FileArtifactStore {
    /// Opens (creating if needed) the folder `root` and locks it against other processes, with
    /// the default size limit ([`DEFAULT_MAX_BYTES`]). Blocking; call it at start-up.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ArtifactError> {
        Self::open_with_limit(root, DEFAULT_MAX_BYTES)
    }

    /// Like [`FileArtifactStore::open`], with a size limit of `max_bytes` per version.
    pub fn open_with_limit(
        root: impl Into<PathBuf>,
        max_bytes: u64,
    ) -> Result<Self, ArtifactError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(disk::io("create folder", &root))?;
        let lock_path = root.join(LOCK_FILE);
        let lock = File::create(&lock_path).map_err(disk::io("create", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(ArtifactError::Locked { path: root }),
            Err(TryLockError::Error(source)) => {
                return Err(ArtifactError::Io {
                    op: "lock",
                    path: lock_path,
                    source,
                })
            }
        }
        disk::empty_trash(&root.join(disk::TRASH_DIR))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                _lock: lock,
                locks: (0..USER_LOCKS).map(|_| Arc::new(Mutex::new(()))).collect(),
                max_bytes,
            }),
        })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The folder of a user's own data (named users only).
    fn user_dir(&self, user_id: &str) -> PathBuf {
        self.inner.root.join("users").join(encode_name(user_id))
    }

    /// The folder of one scope.
    fn scope_dir(&self, scope: &ArtifactScope) -> PathBuf {
        match scope {
            ArtifactScope::User(user) => self.user_dir(user).join("user"),
            ArtifactScope::Session(key) if key.is_anonymous() => self
                .inner
                .root
                .join("anonymous")
                .join(encode_name(key.session_id())),
            ArtifactScope::Session(key) => self
                .user_dir(key.user_id())
                .join("sessions")
                .join(encode_name(key.session_id())),
        }
    }

    /// The write lock of a user's artifacts.
    async fn lock(&self, user_id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(user_id);
        let stripe = usize::try_from(hash % USER_LOCKS as u64).unwrap_or(0);
        self.inner.locks[stripe].clone().lock_owned().await
    }

    /// Runs blocking file work on the file kit's I/O threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Path) -> Result<T, ArtifactError> + Send + 'static,
    ) -> Result<T, ArtifactError> {
        let inner = self.inner.clone();
        super::pool::run(move || work(&inner.root))
            .await
            .map_err(|detail| ArtifactError::Unavailable {
                backend: "file",
                detail,
            })?
    }
}

#[async_trait]
impl ArtifactStore for FileArtifactStore {
    fn name(&self) -> &'static str {
        "file"
    }

    fn max_bytes(&self) -> u64 {
        self.inner.max_bytes
    }

    async fn save(
        &self,
        scope: &ArtifactScope,
        name: &str,
        bytes: &[u8],
        mime: &str,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        check_save(name, bytes, mime, self.inner.max_bytes)?;
        let dir = self.scope_dir(scope).join(encode_name(name));
        let root = self.inner.root.clone();
        let (scope_text, name, mime) = (scope.to_string(), name.to_owned(), mime.to_owned());
        // One copy into the blocking task: the caller's slice cannot cross into it.
        let bytes = bytes.to_vec();
        let _guard = self.lock(scope.user_id()).await;
        self.blocking(move |_| disk::save_version(&root, &dir, &scope_text, &name, &mime, &bytes))
            .await
    }

    async fn load(
        &self,
        scope: &ArtifactScope,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Artifact>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let dir = self.scope_dir(scope).join(encode_name(name));
        self.blocking(move |_| {
            let version = match version {
                Some(v) => v,
                None => match disk::version_numbers(&dir)?.last() {
                    Some(&v) => v,
                    None => return Ok(None),
                },
            };
            disk::read_version(&dir, version)
        })
        .await
    }

    async fn list(&self, scope: &ArtifactScope) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        let dir = self.scope_dir(scope);
        let mut metas = self.blocking(move |_| disk::newest_of_each(&dir)).await?;
        metas.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(metas)
    }

    async fn versions(
        &self,
        scope: &ArtifactScope,
        name: &str,
    ) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let dir = self.scope_dir(scope).join(encode_name(name));
        self.blocking(move |_| {
            disk::version_numbers(&dir)?
                .into_iter()
                .map(|v| disk::read_meta(&dir, v))
                .collect()
        })
        .await
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: Option<&str>,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        let mut dir = self.scope_dir(scope);
        if let Some(name) = name {
            validate_name(name)?;
            dir = dir.join(encode_name(name));
        }
        let _guard = self.lock(scope.user_id()).await;
        self.blocking(move |root| disk::remove_tree(root, &dir))
            .await
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, ArtifactError> {
        validate_id(user_id, KeyPart::User)?;
        let dir = self.user_dir(user_id);
        let _guard = self.lock(user_id).await;
        self.blocking(move |root| disk::remove_tree(root, &dir))
            .await
    }
}
