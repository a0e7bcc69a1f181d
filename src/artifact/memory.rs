//! Artifacts in memory: for tests and demos, lost on exit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;

use crate::key::{validate_id, KeyPart};

use super::{
    check_save, check_scope, now_ms, validate_name, Artifact, ArtifactError, ArtifactMeta,
    ArtifactScope, ArtifactStore, DEFAULT_MAX_BYTES, MAX_VERSIONS,
};

/// One name's versions, oldest first (index = version − 1). Bytes are shared, so a load copies
/// them once, outside the lock's hot path only for the one version asked for.
type Versions = Vec<(ArtifactMeta, Arc<[u8]>)>;

/// Keeps artifacts in memory. Cloning is cheap and shares the contents.
#[derive(Debug, Clone)]
pub struct MemoryArtifactStore {
    /// Scope → name → versions.
    scopes: Arc<Mutex<HashMap<ArtifactScope, BTreeMap<String, Versions>>>>,
    /// See [`ArtifactStore::max_bytes`].
    max_bytes: u64,
}

impl Default for MemoryArtifactStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryArtifactStore {
    /// An empty store with the default size limit ([`DEFAULT_MAX_BYTES`]).
    pub fn new() -> Self {
        Self {
            scopes: Arc::default(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Sets the size limit of one version.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }
}

#[async_trait]
impl ArtifactStore for MemoryArtifactStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn save(
        &self,
        scope: &ArtifactScope,
        name: &str,
        bytes: &[u8],
        mime: &str,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        check_save(name, bytes, mime, self.max_bytes)?;
        let mut scopes = self.scopes.lock();
        let versions = scopes
            .entry(scope.clone())
            .or_default()
            .entry(name.to_owned())
            .or_default();
        let version = versions.len() as u64 + 1;
        if version > MAX_VERSIONS {
            return Err(ArtifactError::TooManyVersions {
                scope: scope.to_string(),
                name: name.to_owned(),
            });
        }
        let meta = ArtifactMeta {
            name: name.to_owned(),
            version,
            bytes: bytes.len() as u64,
            mime: mime.to_owned(),
            saved_ms: now_ms(),
        };
        versions.push((meta, Arc::from(bytes)));
        Ok(version)
    }

    async fn load(
        &self,
        scope: &ArtifactScope,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Artifact>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let found = {
            let scopes = self.scopes.lock();
            let versions = scopes.get(scope).and_then(|names| names.get(name));
            versions.and_then(|versions| match version {
                None => versions.last().cloned(),
                Some(0) => None,
                Some(v) => versions.get(usize::try_from(v - 1).ok()?).cloned(),
            })
        };
        Ok(found.map(|(meta, data)| Artifact {
            meta,
            data: data.to_vec(),
        }))
    }

    async fn list(&self, scope: &ArtifactScope) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        let scopes = self.scopes.lock();
        Ok(scopes
            .get(scope)
            .map(|names| {
                names
                    .values()
                    .filter_map(|versions| versions.last().map(|(meta, _)| meta.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn versions(
        &self,
        scope: &ArtifactScope,
        name: &str,
    ) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        check_scope(scope)?;
        validate_name(name)?;
        let scopes = self.scopes.lock();
        Ok(scopes
            .get(scope)
            .and_then(|names| names.get(name))
            .map(|versions| versions.iter().map(|(meta, _)| meta.clone()).collect())
            .unwrap_or_default())
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: Option<&str>,
    ) -> Result<u64, ArtifactError> {
        check_scope(scope)?;
        if let Some(name) = name {
            validate_name(name)?;
        }
        let mut scopes = self.scopes.lock();
        let removed = match name {
            Some(name) => {
                let names = scopes.get_mut(scope);
                let versions = names.and_then(|names| names.remove(name));
                versions.map_or(0, |v| v.len() as u64)
            }
            None => scopes.remove(scope).map_or(0, |names| count(&names)),
        };
        if scopes.get(scope).is_some_and(BTreeMap::is_empty) {
            scopes.remove(scope);
        }
        Ok(removed)
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, ArtifactError> {
        validate_id(user_id, KeyPart::User)?;
        let mut scopes = self.scopes.lock();
        let mut removed = 0;
        scopes.retain(|scope, names| {
            let theirs = scope.user_id() == user_id;
            if theirs {
                removed += count(names);
            }
            !theirs
        });
        Ok(removed)
    }
}

fn count(names: &BTreeMap<String, Versions>) -> u64 {
    names.values().map(|v| v.len() as u64).sum()
}
