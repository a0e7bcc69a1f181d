//! [`open_store`]: opens the store a [`StoreUrl`] names. The one place that maps a spelling to a
//! store, so that every command (and any application) opens stores the same way; a new store
//! reaches all of them by one arm here and one in `url.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use super::file::FileStore;
use super::StoreUrl;
use crate::store::{InMemoryStore, Store, StoreError};

/// Prefix of the temporary folders [`StoreUrl::TempFolder`] creates, so that one left behind by
/// a killed process is recognisable in the system's temporary folder.
const TEMP_PREFIX: &str = "turnstile-";

/// A store opened by [`open_store`], with what goes with it.
///
/// For [`StoreUrl::TempFolder`] it owns the temporary folder: the folder is removed when this
/// value is dropped, so keep it for as long as the store (or any clone of
/// [`OpenedStore::store`]) is used.
pub struct OpenedStore {
    url: StoreUrl,
    store: Arc<dyn Store>,
    /// The file store, for what lives beside its sessions (the pairings).
    file: Option<FileStore>,
    /// The PostgreSQL store, for what lives beside its sessions (the pairings).
    #[cfg(feature = "postgres")]
    postgres: Option<super::postgres::PostgresStore>,
    /// Removed on drop: the folder of a `file:tmp` store.
    temp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for OpenedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedStore")
            .field("url", &self.url)
            .field("store", &self.store.name())
            .field("temporary", &self.is_temporary())
            .finish_non_exhaustive()
    }
}

impl OpenedStore {
    /// The store, as the runtime takes it.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The spelling it was opened from.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The file store behind a `file`, `file:PATH` or `file:tmp` spelling; `None` otherwise.
    pub fn file_store(&self) -> Option<&FileStore> {
        self.file.as_ref()
    }

    /// The PostgreSQL store behind a `postgres://` spelling; `None` otherwise.
    #[cfg(feature = "postgres")]
    pub fn postgres_store(&self) -> Option<&super::postgres::PostgresStore> {
        self.postgres.as_ref()
    }

    /// Whether the store lives in a temporary folder that goes away with this value.
    pub fn is_temporary(&self) -> bool {
        self.temp.is_some()
    }

    /// Where the store is, for people: `memory`, `file:` and the resolved folder, the Redis URL,
    /// or for a temporary folder `file:tmp (PATH, removed at exit)`.
    pub fn describe(&self) -> String {
        match (&self.file, &self.temp) {
            (Some(file), Some(_)) => {
                format!("{} ({}, removed at exit)", self.url, file.root().display())
            }
            (Some(file), None) => format!("file:{}", file.root().display()),
            _ => self.url.to_string(),
        }
    }
}

/// Why [`open_store`] failed. Each variant names the store it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenStoreError {
    /// The store refused to open (locked by another process, a folder that cannot be created,
    /// Redis unreachable…); nothing was changed.
    #[error("cannot open the store {url}: {source}")]
    Store {
        /// The spelling.
        url: StoreUrl,
        /// What the store said.
        #[source]
        source: StoreError,
    },
    /// The temporary folder for `file:tmp` could not be created.
    #[error("cannot create a temporary folder for the store {url}: {source}")]
    TempFolder {
        /// The spelling.
        url: StoreUrl,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store needs a cargo feature this build was made without.
    #[error("the store {url} needs the `{feature}` feature, which this build lacks (rebuild with --features {feature})")]
    NotBuilt {
        /// The spelling.
        url: StoreUrl,
        /// The missing feature.
        feature: &'static str,
    },
}

/// Opens the store `url` names: a new memory store, a file store (taking its folder's lock; a
/// `file:tmp` folder is created first), or a connection to Redis (a server or a Cluster) or a pool of connections to
/// PostgreSQL (whose tables are created or migrated first).
///
/// The file store's blocking open runs on tokio's blocking pool.
pub async fn open_store(url: &StoreUrl) -> Result<OpenedStore, OpenStoreError> {
    let refused = refused_by(url);
    let (root, temp) = match url {
        StoreUrl::Memory => {
            return Ok(opened(url, Arc::new(InMemoryStore::new()), None, None));
        }
        StoreUrl::Redis(address) | StoreUrl::RedisCluster(address) => {
            let store = open_redis(url, address).await?;
            return Ok(opened(url, store, None, None));
        }
        StoreUrl::Postgres(address) => return open_postgres(url, address).await,
        StoreUrl::DataFolder => (FileStore::default_root().map_err(&refused)?, None),
        StoreUrl::Folder(path) => (path.clone(), None),
        StoreUrl::TempFolder => {
            let temp = tempfile::Builder::new()
                .prefix(TEMP_PREFIX)
                .tempdir()
                .map_err(|source| OpenStoreError::TempFolder {
                    url: url.clone(),
                    source,
                })?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let file = open_file(root).await.map_err(refused)?;
    Ok(opened(url, Arc::new(file.clone()), Some(file), temp))
}

fn opened(
    url: &StoreUrl,
    store: Arc<dyn Store>,
    file: Option<FileStore>,
    temp: Option<tempfile::TempDir>,
) -> OpenedStore {
    OpenedStore {
        url: url.clone(),
        store,
        file,
        #[cfg(feature = "postgres")]
        postgres: None,
        temp,
    }
}

async fn open_file(root: PathBuf) -> Result<FileStore, StoreError> {
    tokio::task::spawn_blocking(move || FileStore::open(root))
        .await
        .map_err(|e| StoreError::Unavailable {
            backend: "file",
            detail: format!("the open task did not finish: {e}"),
        })?
}

/// Turns a store's refusal to open into the opener's error for `url`.
fn refused_by(url: &StoreUrl) -> impl Fn(StoreError) -> OpenStoreError + '_ {
    move |source| OpenStoreError::Store {
        url: url.clone(),
        source,
    }
}

/// The store `url` names needs a cargo `feature` this build lacks.
#[allow(dead_code)] // unused when built with every networked store
fn not_built(url: &StoreUrl, feature: &'static str) -> OpenStoreError {
    OpenStoreError::NotBuilt {
        url: url.clone(),
        feature,
    }
}

#[cfg(feature = "redis")]
async fn open_redis(url: &StoreUrl, address: &str) -> Result<Arc<dyn Store>, OpenStoreError> {
    let store = super::redis::RedisStore::connect(address, Default::default())
        .await
        .map_err(refused_by(url))?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &StoreUrl, _address: &str) -> Result<Arc<dyn Store>, OpenStoreError> {
    Err(not_built(url, "redis"))
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &StoreUrl, address: &str) -> Result<OpenedStore, OpenStoreError> {
    let store = super::postgres::PostgresStore::connect(address, Default::default())
        .await
        .map_err(refused_by(url))?;
    let mut opened = opened(url, Arc::new(store.clone()), None, None);
    opened.postgres = Some(store);
    Ok(opened)
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(url: &StoreUrl, _address: &str) -> Result<OpenedStore, OpenStoreError> {
    Err(not_built(url, "postgres"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::SessionKey;
    use crate::store::conformance::turn_events;

    #[tokio::test]
    async fn a_folder_store_keeps_its_sessions_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::Folder(dir.path().join("data"));
        let key = SessionKey::new("u", "s").unwrap();
        let first = open_store(&url).await.unwrap();
        assert!(first.file_store().is_some() && !first.is_temporary());
        assert_eq!(
            first.describe(),
            format!("file:{}", dir.path().join("data").display())
        );
        first
            .store()
            .append(&key, 0, &turn_events(1, "hi", None))
            .await
            .unwrap();
        let err = open_store(&url).await.unwrap_err();
        assert!(matches!(
            err,
            OpenStoreError::Store {
                source: StoreError::Locked { .. },
                ..
            }
        ));
        assert!(
            err.to_string()
                .starts_with(&format!("cannot open the store {url}")),
            "{err}"
        );
        drop(first);
        let again = open_store(&url).await.unwrap();
        assert!(again.store().load(&key, 4).await.unwrap().record.is_some());
    }

    #[tokio::test]
    async fn a_temporary_folder_is_named_and_removed_with_the_store() {
        let opened = open_store(&StoreUrl::TempFolder).await.unwrap();
        let root = opened.file_store().unwrap().root().to_path_buf();
        assert!(opened.is_temporary() && root.is_dir());
        let described = opened.describe();
        assert!(described.starts_with("file:tmp ("), "{described}");
        assert!(
            described.contains(&root.display().to_string()),
            "{described}"
        );
        drop(opened);
        assert!(!root.exists(), "the temporary folder is gone");
    }

    #[tokio::test]
    async fn memory_is_a_fresh_memory_store() {
        let opened = open_store(&StoreUrl::Memory).await.unwrap();
        assert_eq!(opened.store().name(), "memory");
        assert_eq!(opened.describe(), "memory");
        assert!(opened.file_store().is_none());
    }
}
