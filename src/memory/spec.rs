//! Which memory store a spelling such as `file:DIR` names (what `turnstile serve --memory`
//! takes); [`open_memory`](crate::backend::open_memory) opens it.

use std::path::PathBuf;
use std::str::FromStr;

use super::Ingest;
use crate::parse::ParseError;

/// A memory store named by a spelling: `off`, `memory`, `file:DIR`, `redis://…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemorySpec {
    /// No memory.
    Off,
    /// [`InMemory`](super::InMemory).
    Memory,
    /// `FileMemory` in this folder.
    File(PathBuf),
    /// `RedisMemory` at this URL (feature `redis`).
    Redis(String),
}

impl FromStr for MemorySpec {
    type Err = ParseError;

    fn from_str(spec: &str) -> Result<Self, ParseError> {
        match spec {
            "off" => Ok(Self::Off),
            "memory" => Ok(Self::Memory),
            _ if spec.starts_with("redis://") || spec.starts_with("rediss://") => {
                Ok(Self::Redis(spec.to_owned()))
            }
            _ => match spec.strip_prefix("file:") {
                Some(dir) if !dir.is_empty() => Ok(Self::File(PathBuf::from(dir))),
                _ => Err(ParseError::new(
                    "memory store",
                    spec,
                    "off, memory, file:DIR or redis://HOST:PORT",
                )),
            },
        }
    }
}

impl FromStr for Ingest {
    type Err = ParseError;

    fn from_str(when: &str) -> Result<Self, ParseError> {
        match when {
            "passivation" => Ok(Self::OnPassivation),
            "compaction" => Ok(Self::OnCompaction),
            "explicit" => Ok(Self::Explicit),
            _ => Err(ParseError::new(
                "ingestion moment",
                when,
                "passivation, compaction or explicit",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_name_stores_or_say_what_is_accepted() {
        assert_eq!("off".parse(), Ok(MemorySpec::Off));
        assert_eq!("file:/x".parse(), Ok(MemorySpec::File("/x".into())));
        assert_eq!(
            "redis://127.0.0.1:6379".parse(),
            Ok(MemorySpec::Redis("redis://127.0.0.1:6379".into()))
        );
        let err = "file:".parse::<MemorySpec>().unwrap_err();
        assert!(err.to_string().contains("file:DIR"), "{err}");
        assert_eq!("compaction".parse(), Ok(Ingest::OnCompaction));
        assert!("sometimes".parse::<Ingest>().is_err());
    }
}
