//! [`open_memory`]: the memory store a [`MemorySpec`] names, opened.

use std::sync::Arc;

use crate::memory::{InMemory, MemoryError, MemorySpec, MemoryStore};

use super::file::FileMemory;

/// Key prefix of memory kept in Redis by `turnstile serve`: the session store's default, so
/// that one Redis holds one deployment's sessions and memory side by side (memory keys are
/// under `PREFIX:mem:`, apart from every session key).
pub const REDIS_MEMORY_PREFIX: &str = "turnstile";

/// Opens the memory store `spec` names; `None` for `off`.
pub async fn open_memory(spec: &MemorySpec) -> Result<Option<Arc<dyn MemoryStore>>, MemoryError> {
    Ok(match spec {
        MemorySpec::Off => None,
        MemorySpec::Memory => Some(Arc::new(InMemory::new())),
        MemorySpec::File(dir) => Some(Arc::new(FileMemory::open(dir.clone())?)),
        #[cfg(feature = "redis")]
        MemorySpec::Redis(url) => Some(Arc::new(
            super::redis::RedisMemory::connect(url, REDIS_MEMORY_PREFIX).await?,
        )),
        #[cfg(not(feature = "redis"))]
        MemorySpec::Redis(_) => {
            return Err(MemoryError::Unavailable {
                backend: "redis",
                detail: "this build has no Redis support (feature `redis`)".into(),
            })
        }
    })
}
