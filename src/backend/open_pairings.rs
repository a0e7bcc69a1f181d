//! [`open_pairings`]: the pairing store that goes with a store opened by
//! [`open_store`](super::open_store), kept in the same place.

use std::sync::Arc;

use super::file::FilePairingStore;
use super::{OpenedStore, StoreUrl};
use crate::pairing::{MemoryPairingStore, PairingError, PairingStore};

/// Opens the pairings that live beside `opened`'s sessions: [`FilePairingStore`] in a file
/// store's folder, [`RedisPairingStore`](super::redis::RedisPairingStore) under the Redis session
/// store's default prefix, [`PostgresPairingStore`](super::postgres::PostgresPairingStore) in the
/// PostgreSQL store's schema (on its pool), or a new [`MemoryPairingStore`] beside a memory
/// store.
///
/// Reads the pairings file of a file store, on tokio's blocking pool.
pub async fn open_pairings(opened: &OpenedStore) -> Result<Arc<dyn PairingStore>, PairingError> {
    // Exhaustive on purpose: a new backend says here where its pairings live, rather than
    // falling to pairings in memory that vanish at the next restart.
    match opened.url() {
        StoreUrl::Memory => Ok(Arc::new(MemoryPairingStore::new())),
        StoreUrl::DataFolder | StoreUrl::Folder(_) | StoreUrl::TempFolder => {
            let file = opened
                .file_store()
                .ok_or_else(|| opened_as_other(opened, "file"))?
                .clone();
            let pairings = tokio::task::spawn_blocking(move || FilePairingStore::open(&file))
                .await
                .map_err(|e| PairingError::Unavailable {
                    backend: "file",
                    detail: format!("the open task did not finish: {e}"),
                })??;
            Ok(Arc::new(pairings))
        }
        StoreUrl::Redis(address) | StoreUrl::RedisCluster(address) => open_redis(address).await,
        StoreUrl::Postgres(_) => open_postgres(opened),
    }
}

/// An [`OpenedStore`] whose store is not the one its spelling names (only a bug can do this).
fn opened_as_other(opened: &OpenedStore, backend: &'static str) -> PairingError {
    PairingError::Unavailable {
        backend,
        detail: format!("{} did not open a {backend} store", opened.url()),
    }
}

#[cfg(feature = "postgres")]
fn open_postgres(opened: &OpenedStore) -> Result<Arc<dyn PairingStore>, PairingError> {
    let store = opened
        .postgres_store()
        .ok_or_else(|| opened_as_other(opened, "postgres"))?;
    Ok(Arc::new(super::postgres::PostgresPairingStore::new(store)))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_opened: &OpenedStore) -> Result<Arc<dyn PairingStore>, PairingError> {
    Err(PairingError::Unavailable {
        backend: "postgres",
        detail: "this build has no PostgreSQL support (rebuild with --features postgres)".into(),
    })
}

#[cfg(feature = "redis")]
async fn open_redis(address: &str) -> Result<Arc<dyn PairingStore>, PairingError> {
    let options = super::redis::RedisOptions::default();
    let pairings = super::redis::RedisPairingStore::connect(address, options.prefix()).await?;
    Ok(Arc::new(pairings))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(_address: &str) -> Result<Arc<dyn PairingStore>, PairingError> {
    Err(PairingError::Unavailable {
        backend: "redis",
        detail: "this build has no Redis support (rebuild with --features redis)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::open_store;
    use super::*;

    #[tokio::test]
    async fn file_pairings_live_in_the_store_folder() {
        let dir = tempfile::tempdir().unwrap();
        let opened = open_store(&StoreUrl::Folder(dir.path().into()))
            .await
            .unwrap();
        let pairings = open_pairings(&opened).await.unwrap();
        assert_eq!(pairings.name(), "file");
        pairings.put("web", "w1", "alice").await.unwrap();
        assert!(dir.path().join(super::super::file::PAIRINGS_FILE).is_file());
        let memory = open_store(&StoreUrl::Memory).await.unwrap();
        assert_eq!(open_pairings(&memory).await.unwrap().name(), "memory");
    }
}
