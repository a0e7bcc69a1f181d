//! [`open_pairings`]: the pairing store that goes with a store opened by
//! [`open_store`](crate::store::open_store), kept in the same place.

use std::sync::Arc;

use super::{FilePairingStore, MemoryPairingStore, PairingError, PairingStore};
use crate::store::{OpenedStore, StoreUrl};

/// Opens the pairings that live beside `opened`'s sessions: [`FilePairingStore`] in a file
/// store's folder, [`RedisPairingStore`](super::RedisPairingStore) under the Redis session
/// store's default prefix, [`PostgresPairingStore`](super::PostgresPairingStore) in the
/// PostgreSQL store's schema (on its pool), or a new [`MemoryPairingStore`] beside a memory
/// store.
///
/// Reads the pairings file of a file store, on tokio's blocking pool.
pub async fn open_pairings(opened: &OpenedStore) -> Result<Arc<dyn PairingStore>, PairingError> {
    if let Some(file) = opened.file_store() {
        let file = file.clone();
        let pairings = tokio::task::spawn_blocking(move || FilePairingStore::open(&file))
            .await
            .map_err(|e| PairingError::Unavailable {
                backend: "file",
                detail: format!("the open task did not finish: {e}"),
            })??;
        return Ok(Arc::new(pairings));
    }
    #[cfg(feature = "postgres")]
    if let Some(store) = opened.postgres_store() {
        return Ok(Arc::new(super::PostgresPairingStore::new(store)));
    }
    match opened.url() {
        StoreUrl::Redis(address) | StoreUrl::RedisCluster(address) => open_redis(address).await,
        _ => Ok(Arc::new(MemoryPairingStore::new())),
    }
}

#[cfg(feature = "redis")]
async fn open_redis(address: &str) -> Result<Arc<dyn PairingStore>, PairingError> {
    let options = crate::store::RedisOptions::default();
    let pairings = super::RedisPairingStore::connect(address, options.prefix()).await?;
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
    use super::*;
    use crate::store::open_store;

    #[tokio::test]
    async fn file_pairings_live_in_the_store_folder() {
        let dir = tempfile::tempdir().unwrap();
        let opened = open_store(&StoreUrl::Folder(dir.path().into()))
            .await
            .unwrap();
        let pairings = open_pairings(&opened).await.unwrap();
        assert_eq!(pairings.name(), "file");
        pairings.put("web", "w1", "alice").await.unwrap();
        assert!(dir.path().join(super::super::PAIRINGS_FILE).is_file());
        let memory = open_store(&StoreUrl::Memory).await.unwrap();
        assert_eq!(open_pairings(&memory).await.unwrap().name(), "memory");
    }
}
