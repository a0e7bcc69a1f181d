//! `serve --artifacts` and `serve --state-keys`: where artifacts live, and the registry of
//! declared state keys.

use std::path::PathBuf;
use std::sync::Arc;

use turnstile::artifact::{ArtifactStore, FileArtifactStore, MemoryArtifactStore};
use turnstile::state_keys::{Mode, StateKeys};
use turnstile::store::{OpenedStore, StoreUrl};

use super::ServeArgs;

/// The folder of a file store's artifacts, inside its root.
const ARTIFACTS_FOLDER: &str = "artifacts";

/// Opens the artifact store `--artifacts` names: `auto` (the default) puts them beside the
/// session store (memory → memory, a file store → its folder's `artifacts/`, Redis → the same
/// Redis), `off` keeps none, `memory`, `file:DIR` or a Redis URL name one.
pub(super) async fn open_artifacts(
    args: &ServeArgs,
    opened: &OpenedStore,
) -> Result<Option<Arc<dyn ArtifactStore>>, String> {
    let limit = args.artifact_max_bytes;
    let spelled = args.artifacts.as_str();
    let target = match spelled {
        "off" => return Ok(None),
        "auto" => match (opened.url(), opened.file_store()) {
            (_, Some(file)) => Target::Folder(file.root().join(ARTIFACTS_FOLDER)),
            (StoreUrl::Memory, _) => Target::Memory,
            (StoreUrl::Redis(url) | StoreUrl::RedisCluster(url), _) => Target::Redis(url.clone()),
            (other, _) => {
                return Err(format!(
                    "--artifacts auto has no place for artifacts beside the store {other}; \
                     give --artifacts memory, file:DIR, redis://… or off"
                ))
            }
        },
        "memory" => Target::Memory,
        _ => match spelled.strip_prefix("file:") {
            Some(dir) if !dir.is_empty() => Target::Folder(PathBuf::from(dir)),
            _ if spelled.starts_with("redis") => Target::Redis(spelled.to_owned()),
            _ => {
                return Err(format!(
                    "unknown --artifacts {spelled:?}: expected auto, off, memory, file:DIR or \
                     redis://HOST:PORT"
                ))
            }
        },
    };
    target.open(limit).await.map(Some)
}

enum Target {
    Memory,
    Folder(PathBuf),
    Redis(String),
}

impl Target {
    async fn open(self, limit: u64) -> Result<Arc<dyn ArtifactStore>, String> {
        match self {
            Self::Memory => Ok(Arc::new(MemoryArtifactStore::new().with_max_bytes(limit))),
            Self::Folder(dir) => {
                let shown = dir.display().to_string();
                let opened = tokio::task::spawn_blocking(move || {
                    FileArtifactStore::open_with_limit(dir, limit)
                })
                .await
                .map_err(|e| format!("opening the artifact folder {shown}: {e}"))?;
                let store = opened.map_err(|e| format!("artifact folder {shown}: {e}"))?;
                Ok(Arc::new(store))
            }
            Self::Redis(url) => open_redis(&url, limit).await,
        }
    }
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, limit: u64) -> Result<Arc<dyn ArtifactStore>, String> {
    let options = turnstile::store::RedisOptions::default();
    let store = turnstile::artifact::RedisArtifactStore::connect_with_limit(url, &options, limit)
        .await
        .map_err(|e| format!("artifact store {url}: {e}"))?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &str, _limit: u64) -> Result<Arc<dyn ArtifactStore>, String> {
    Err(format!(
        "artifact store {url} needs the `redis` feature, which this build lacks"
    ))
}

/// The registry `--state-keys FILE` names, in the mode `--state-keys-mode` gives (else the
/// file's own `mode`); `None` without the flag.
pub(super) fn load_state_keys(args: &ServeArgs) -> Result<Option<StateKeys>, String> {
    let Some(path) = &args.state_keys else {
        if args.state_keys_mode.is_some() {
            return Err("--state-keys-mode needs --state-keys FILE".to_owned());
        }
        return Ok(None);
    };
    let keys = StateKeys::load(path).map_err(|e| e.to_string())?;
    let mode: Option<Mode> = args.state_keys_mode;
    Ok(Some(match mode {
        Some(mode) => keys.with_mode(mode),
        None => keys,
    }))
}
