//! [`ArtifactPlace`]: where artifacts live, beside the session store or in a place of their own,
//! as `serve --artifacts` and `sessions --artifacts` spell it. Both commands (and an application
//! that takes the same spelling) read it here, so that `sessions delete` finds the artifacts
//! `serve` saved for the same store.

use std::path::PathBuf;
use std::sync::Arc;

use super::file::{FileArtifactStore, ARTIFACTS_FOLDER};
use super::{OpenedStore, StoreUrl};
use crate::artifact::{ArtifactError, ArtifactStore, MemoryArtifactStore};
use crate::parse::ParseError;

/// Where artifacts live, as `--artifacts` and the session store say.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactPlace {
    /// `off`: no artifact store.
    Off,
    /// In this process's memory.
    Memory,
    /// A `FileArtifactStore` folder; `beside` when `auto` chose it inside a file store's root.
    Folder {
        /// The folder.
        dir: PathBuf,
        /// Chosen by `auto`, not named by the user.
        beside: bool,
    },
    /// A Redis (or Redis Cluster) URL.
    Redis(String),
    /// `auto` beside a store that has no place for artifacts (PostgreSQL), described.
    NoneBeside(String),
}

impl ArtifactPlace {
    /// Reads `--artifacts`: `auto` puts artifacts beside the session store (memory → memory, a
    /// file store → its folder's `artifacts/`, Redis → the same Redis), `off` keeps none,
    /// `memory`, `file:DIR` or a Redis URL name one.
    pub fn resolve(spelled: &str, opened: &OpenedStore) -> Result<Self, ParseError> {
        Ok(match spelled {
            "off" => Self::Off,
            "auto" => {
                Self::beside(opened).unwrap_or_else(|| Self::NoneBeside(opened.url().to_string()))
            }
            "memory" => Self::Memory,
            _ => match spelled.strip_prefix("file:") {
                Some(dir) if !dir.is_empty() => Self::Folder {
                    dir: PathBuf::from(dir),
                    beside: false,
                },
                _ if spelled.starts_with("redis") => Self::Redis(spelled.to_owned()),
                _ => {
                    return Err(ParseError::new(
                        "artifact place",
                        spelled,
                        "auto, off, memory, file:DIR or redis://HOST:PORT",
                    ))
                }
            },
        })
    }

    /// Where artifacts live beside `opened`'s sessions (what `auto` chooses); `None` for a
    /// store that keeps none (PostgreSQL). Exhaustive on purpose: a new spelling says here
    /// where its artifacts live.
    pub fn beside(opened: &OpenedStore) -> Option<Self> {
        match opened.url() {
            StoreUrl::Memory => Some(Self::Memory),
            StoreUrl::DataFolder | StoreUrl::Folder(_) | StoreUrl::TempFolder => {
                opened.file_store().map(|file| Self::Folder {
                    dir: file.root().join(ARTIFACTS_FOLDER),
                    beside: true,
                })
            }
            StoreUrl::Redis(url) | StoreUrl::RedisCluster(url) => Some(Self::Redis(url.clone())),
            StoreUrl::Postgres(_) => None,
        }
    }

    /// Opens the artifact store, with `limit` bytes per version; `None` for `Off` and
    /// `NoneBeside`. A file folder is created if missing.
    pub async fn open(self, limit: u64) -> Result<Option<Arc<dyn ArtifactStore>>, ArtifactError> {
        match self {
            Self::Off | Self::NoneBeside(_) => Ok(None),
            Self::Memory => Ok(Some(Arc::new(
                MemoryArtifactStore::new().with_max_bytes(limit),
            ))),
            Self::Folder { dir, .. } => {
                let shown = dir.display().to_string();
                let opened = tokio::task::spawn_blocking(move || {
                    FileArtifactStore::open_with_limit(dir, limit)
                })
                .await
                .map_err(|e| ArtifactError::Unavailable {
                    backend: "file",
                    detail: format!("opening the folder {shown} did not finish: {e}"),
                })?;
                Ok(Some(Arc::new(opened?)))
            }
            Self::Redis(url) => open_redis(&url, limit).await.map(Some),
        }
    }
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, limit: u64) -> Result<Arc<dyn ArtifactStore>, ArtifactError> {
    let options = super::redis::RedisOptions::default();
    let store = super::redis::RedisArtifactStore::connect_with_limit(url, &options, limit).await?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(url: &str, _limit: u64) -> Result<Arc<dyn ArtifactStore>, ArtifactError> {
    Err(ArtifactError::Unavailable {
        backend: "redis",
        detail: format!("{url} needs the `redis` feature, which this build lacks"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::open_store;
    use super::*;

    #[tokio::test]
    async fn spellings_name_a_place_or_say_what_is_accepted() {
        let memory = open_store(&StoreUrl::Memory).await.expect("memory store");
        let resolve = |spelled: &str| ArtifactPlace::resolve(spelled, &memory);
        assert_eq!(resolve("auto"), Ok(ArtifactPlace::Memory));
        assert_eq!(resolve("off"), Ok(ArtifactPlace::Off));
        assert_eq!(
            resolve("file:/srv/art"),
            Ok(ArtifactPlace::Folder {
                dir: PathBuf::from("/srv/art"),
                beside: false
            })
        );
        assert_eq!(
            resolve("redis://127.0.0.1:6379/"),
            Ok(ArtifactPlace::Redis("redis://127.0.0.1:6379/".to_owned()))
        );
        for bad in ["file:", "s3://bucket", ""] {
            let err = resolve(bad).expect_err(bad).to_string();
            assert!(err.contains("expected auto, off, memory"), "{err}");
        }

        let files = open_store(&StoreUrl::TempFolder).await.expect("file store");
        let root = files.file_store().expect("a file store").root().to_owned();
        assert_eq!(
            ArtifactPlace::resolve("auto", &files),
            Ok(ArtifactPlace::Folder {
                dir: root.join(ARTIFACTS_FOLDER),
                beside: true
            })
        );
    }
}
