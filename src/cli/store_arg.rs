//! The `--store` argument: `memory`, `file`, `file:PATH` or a `redis://` URL.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use turnstile::store::FileStore;
use turnstile::{MemoryStore, Store};

/// Where a command keeps its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreArg {
    /// In process memory; gone on exit.
    Memory,
    /// JSON files; `None` means a fresh temporary folder.
    File(Option<PathBuf>),
    /// A Redis server.
    Redis(String),
}

impl FromStr for StoreArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "memory" => Ok(Self::Memory),
            "file" => Ok(Self::File(None)),
            _ if s.starts_with("file:") && s.len() > 5 => Ok(Self::File(Some(s[5..].into()))),
            _ if s.starts_with("redis://") || s.starts_with("rediss://") => {
                Ok(Self::Redis(s.to_owned()))
            }
            _ => Err(format!(
                "unknown store {s:?}; expected memory, file, file:PATH or redis://HOST:PORT"
            )),
        }
    }
}

/// An opened store, plus the temporary folder that must outlive it.
pub struct OpenedStore {
    pub store: Arc<dyn Store>,
    pub description: String,
    _temp: Option<tempfile::TempDir>,
}

impl StoreArg {
    /// Opens the store.
    pub async fn open(&self) -> Result<OpenedStore, String> {
        match self {
            Self::Memory => Ok(OpenedStore {
                store: Arc::new(MemoryStore::new()),
                description: "memory".into(),
                _temp: None,
            }),
            Self::File(path) => {
                let (root, temp) = match path {
                    Some(path) => (path.clone(), None),
                    None => {
                        let dir = tempfile::Builder::new()
                            .prefix("turnstile-load-")
                            .tempdir()
                            .map_err(|e| format!("cannot create a temporary folder: {e}"))?;
                        (dir.path().to_path_buf(), Some(dir))
                    }
                };
                let store = FileStore::open(&root).map_err(|e| e.to_string())?;
                Ok(OpenedStore {
                    store: Arc::new(store),
                    description: format!("file:{}", root.display()),
                    _temp: temp,
                })
            }
            Self::Redis(url) => open_redis(url).await,
        }
    }
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str) -> Result<OpenedStore, String> {
    let store = turnstile::store::RedisStore::connect(url, Default::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(OpenedStore {
        store: Arc::new(store),
        description: url.to_owned(),
        _temp: None,
    })
}

#[cfg(not(feature = "redis"))]
async fn open_redis(_url: &str) -> Result<OpenedStore, String> {
    Err("this build has no Redis support (build with --features redis)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_arguments_parse_or_say_what_is_expected() {
        assert_eq!("memory".parse(), Ok(StoreArg::Memory));
        assert_eq!("file".parse(), Ok(StoreArg::File(None)));
        assert_eq!(
            "file:/tmp/x".parse(),
            Ok(StoreArg::File(Some("/tmp/x".into())))
        );
        assert_eq!(
            "redis://127.0.0.1:6379".parse(),
            Ok(StoreArg::Redis("redis://127.0.0.1:6379".into()))
        );
        let err = "postgres://x".parse::<StoreArg>().unwrap_err();
        assert!(err.contains("expected memory, file"), "{err}");
        assert!("file:".parse::<StoreArg>().is_err());
    }
}
