//! [`open_backend`]: every family of one backend, opened for one [`StoreUrl`], and a clear
//! refusal for a family that backend does not keep — never a quiet stand-in in memory that would
//! lose its data at the next restart.

use std::fmt;
use std::sync::Arc;

use super::file::MEMORY_FOLDER;
use super::{
    open_memory, open_pairings, open_store, ArtifactPlace, OpenStoreError, OpenedStore, StoreUrl,
};
use crate::artifact::{ArtifactError, ArtifactStore};
use crate::memory::{MemoryError, MemorySpec, MemoryStore};
use crate::pairing::{PairingError, PairingStore};
use crate::store::Store;

/// A kind of data a backend may keep, each behind its own trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Family {
    /// Sessions and their leases ([`Store`]).
    Sessions,
    /// Channel pairings ([`PairingStore`]).
    Pairings,
    /// Artifacts ([`ArtifactStore`]).
    Artifacts,
    /// Memory across sessions ([`MemoryStore`]).
    Memory,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sessions => "sessions",
            Self::Pairings => "pairings",
            Self::Artifacts => "artifacts",
            Self::Memory => "memory across sessions",
        })
    }
}

/// Why [`open_backend`] or one of [`Backend`]'s openers failed. Each variant names the backend
/// and the family it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The sessions could not be opened.
    #[error(transparent)]
    Sessions(#[from] OpenStoreError),
    /// The backend keeps no data of this family: the caller names a place of its own for it.
    #[error(
        "the {backend} backend keeps no {family}: give them a place of their own \
         (memory, file:DIR or redis://HOST:PORT)"
    )]
    NotKept {
        /// The backend (`memory`, `file`, `redis`, `postgres`).
        backend: &'static str,
        /// The family it does not keep.
        family: Family,
    },
    /// The pairings beside the sessions could not be opened.
    #[error("cannot open the pairings of {url}: {source}")]
    Pairings {
        /// The backend's spelling.
        url: StoreUrl,
        /// What the pairing store said.
        #[source]
        source: PairingError,
    },
    /// The artifacts beside the sessions could not be opened.
    #[error("cannot open the artifacts of {url}: {source}")]
    Artifacts {
        /// The backend's spelling.
        url: StoreUrl,
        /// What the artifact store said.
        #[source]
        source: ArtifactError,
    },
    /// The memory beside the sessions could not be opened.
    #[error("cannot open the memory of {url}: {source}")]
    Memory {
        /// The backend's spelling.
        url: StoreUrl,
        /// What the memory store said.
        #[source]
        source: MemoryError,
    },
}

/// One backend, opened: its sessions and pairings, and openers for the families that are only
/// opened when asked for (artifacts, memory).
///
/// Owns the [`OpenedStore`]: for `file:tmp` the temporary folder goes when this value does.
pub struct Backend {
    opened: OpenedStore,
    pairings: Arc<dyn PairingStore>,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("opened", &self.opened)
            .field("pairings", &self.pairings.name())
            .finish()
    }
}

/// Opens the backend `url` names: its sessions (as [`open_store`] does) and the pairings kept
/// beside them (as [`open_pairings`] does).
pub async fn open_backend(url: &StoreUrl) -> Result<Backend, BackendError> {
    let opened = open_store(url).await?;
    let pairings = open_pairings(&opened)
        .await
        .map_err(|source| BackendError::Pairings {
            url: url.clone(),
            source,
        })?;
    Ok(Backend { opened, pairings })
}

impl Backend {
    /// The backend's name: `memory`, `file`, `redis` or `postgres`.
    pub fn name(&self) -> &'static str {
        backend_name(self.opened.url())
    }

    /// Whether the backend keeps data of `family`.
    pub fn keeps(&self, family: Family) -> bool {
        match family {
            Family::Sessions | Family::Pairings => true,
            Family::Artifacts => ArtifactPlace::beside(&self.opened).is_some(),
            Family::Memory => memory_beside(&self.opened).is_some(),
        }
    }

    /// The session store, as the runtime takes it.
    pub fn sessions(&self) -> &Arc<dyn Store> {
        self.opened.store()
    }

    /// The opened session store, with what goes with it.
    pub fn opened(&self) -> &OpenedStore {
        &self.opened
    }

    /// The pairings kept beside the sessions.
    pub fn pairings(&self) -> &Arc<dyn PairingStore> {
        &self.pairings
    }

    /// Opens the artifacts kept beside the sessions, with `max_bytes` per version: in memory, a
    /// file backend's `artifacts/` folder, or the same Redis. [`BackendError::NotKept`] for a
    /// backend that keeps none (PostgreSQL).
    pub async fn open_artifacts(
        &self,
        max_bytes: u64,
    ) -> Result<Arc<dyn ArtifactStore>, BackendError> {
        let place =
            ArtifactPlace::beside(&self.opened).ok_or_else(|| self.not_kept(Family::Artifacts))?;
        let opened = place
            .open(max_bytes)
            .await
            .map_err(|source| BackendError::Artifacts {
                url: self.opened.url().clone(),
                source,
            })?;
        opened.ok_or_else(|| self.not_kept(Family::Artifacts))
    }

    /// Opens the memory across sessions kept beside the sessions: in memory, a file backend's
    /// `memory/` folder, or the same (standalone) Redis under
    /// [`REDIS_MEMORY_PREFIX`](super::REDIS_MEMORY_PREFIX). [`BackendError::NotKept`] for a
    /// backend that keeps none: PostgreSQL, and Redis Cluster (memory talks to one node).
    pub async fn open_memory(&self) -> Result<Arc<dyn MemoryStore>, BackendError> {
        let spec = memory_beside(&self.opened).ok_or_else(|| self.not_kept(Family::Memory))?;
        let opened = open_memory(&spec)
            .await
            .map_err(|source| BackendError::Memory {
                url: self.opened.url().clone(),
                source,
            })?;
        opened.ok_or_else(|| self.not_kept(Family::Memory))
    }

    fn not_kept(&self, family: Family) -> BackendError {
        BackendError::NotKept {
            backend: self.name(),
            family,
        }
    }
}

/// Where the memory across sessions of `opened`'s backend lives; `None` where it keeps none.
/// Exhaustive on purpose: a new spelling says here whether memory lives beside it.
fn memory_beside(opened: &OpenedStore) -> Option<MemorySpec> {
    match opened.url() {
        StoreUrl::Memory => Some(MemorySpec::Memory),
        StoreUrl::DataFolder | StoreUrl::Folder(_) | StoreUrl::TempFolder => opened
            .file_store()
            .map(|file| MemorySpec::File(file.root().join(MEMORY_FOLDER))),
        StoreUrl::Redis(url) => Some(MemorySpec::Redis(url.clone())),
        StoreUrl::RedisCluster(_) | StoreUrl::Postgres(_) => None,
    }
}

/// The backend a spelling names. Exhaustive on purpose: a new spelling names its backend here.
pub(super) fn backend_name(url: &StoreUrl) -> &'static str {
    match url {
        StoreUrl::Memory => "memory",
        StoreUrl::DataFolder | StoreUrl::Folder(_) | StoreUrl::TempFolder => "file",
        StoreUrl::Redis(_) | StoreUrl::RedisCluster(_) => "redis",
        StoreUrl::Postgres(_) => "postgres",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryEntry, Speaker};

    #[tokio::test]
    async fn a_file_backend_keeps_every_family_in_its_root() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = StoreUrl::Folder(dir.path().to_owned());
        let backend = open_backend(&url).await.expect("a file backend");
        assert_eq!(backend.name(), "file");
        assert_eq!(backend.sessions().name(), "file");
        assert_eq!(backend.pairings().name(), "file");
        let artifacts = backend.open_artifacts(1_024).await.expect("artifacts");
        assert_eq!(artifacts.name(), "file");
        assert!(dir.path().join("artifacts").is_dir());
        let memory = backend.open_memory().await.expect("memory");
        let key = crate::key::SessionKey::new("alice", "s1").expect("a valid key");
        let entry = MemoryEntry {
            key,
            seq: 1,
            speaker: Speaker::User,
            text: "the cat sat on the mat".into(),
            at_ms: 0,
        };
        assert_eq!(memory.ingest(&[entry]).await.expect("remembered"), 1);
        assert!(dir.path().join(MEMORY_FOLDER).is_dir());
        for family in [
            Family::Sessions,
            Family::Pairings,
            Family::Artifacts,
            Family::Memory,
        ] {
            assert!(backend.keeps(family), "{family}");
        }
    }

    #[tokio::test]
    async fn a_memory_backend_keeps_every_family_in_memory() {
        let backend = open_backend(&StoreUrl::Memory).await.expect("memory");
        assert_eq!(
            (backend.name(), backend.pairings().name()),
            ("memory", "memory")
        );
        assert_eq!(
            backend.open_artifacts(1).await.expect("artifacts").name(),
            "memory"
        );
        backend.open_memory().await.expect("memory across sessions");
    }

    #[test]
    fn a_family_a_backend_does_not_keep_is_refused_by_name() {
        let refused = BackendError::NotKept {
            backend: "postgres",
            family: Family::Artifacts,
        };
        assert_eq!(
            refused.to_string(),
            "the postgres backend keeps no artifacts: give them a place of their own \
             (memory, file:DIR or redis://HOST:PORT)"
        );
        let names: Vec<&str> = [
            StoreUrl::Memory,
            StoreUrl::TempFolder,
            StoreUrl::Redis("redis://127.0.0.1:1".into()),
            StoreUrl::Postgres("postgres://127.0.0.1:1/x".into()),
        ]
        .iter()
        .map(backend_name)
        .collect();
        assert_eq!(names, ["memory", "file", "redis", "postgres"]);
    }
}
