//! [`StoreUrl`]: the one spelling of "which store" shared by every command (`--store`) and by
//! applications that take a store from their configuration. Pure: parsing and printing only;
//! [`open_store`](super::open_store) opens one.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The spelling of [`StoreUrl::TempFolder`]. A folder that happens to be named `tmp` is written
/// `file:./tmp`.
pub const TEMP_FOLDER_URL: &str = "file:tmp";

/// What every accepted spelling looks like, for error messages and help texts.
const EXPECTED: &str = "expected memory, file, file:PATH, file:tmp, redis://HOST:PORT, \
     redis+cluster://HOST:PORT[,HOST:PORT…] or postgres://USER@HOST/DATABASE";

/// Which store to open, parsed from `memory`, `file`, `file:PATH`, `file:tmp`, a `redis://` (or
/// `rediss://`) URL, a `redis+cluster://` (or `rediss+cluster://`) URL, or a `postgres://` (or `postgresql://`) URL. [`Display`](fmt::Display) and
/// `Debug` print the same spelling back with any password replaced by `***`, so that errors,
/// reports and logs never carry it; [`StoreUrl::unredacted`] gives the whole spelling, to hand to
/// a process that must open the same store.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `memory`: an [`InMemoryStore`](crate::store::InMemoryStore); gone when the process exits.
    Memory,
    /// `file`: the JSON file store in the data folder — `$TURNSTILE_HOME`, else
    /// `$XDG_DATA_HOME/turnstile`, else `~/.local/share/turnstile` (see
    /// [`FileStore::default_root`](super::FileStore::default_root)).
    DataFolder,
    /// `file:PATH`: the JSON file store in that folder (created if missing).
    Folder(PathBuf),
    /// `file:tmp`: the JSON file store in a fresh temporary folder, removed when the opened store
    /// is dropped. For trial runs and load tests that must leave nothing behind.
    TempFolder,
    /// `redis://…` or `rediss://…`: the Redis store at that URL (feature `redis`);
    /// `replicas=N`, `replica_timeout_ms=MS`, `replica_connections=N`,
    /// `replica_policy=strict|degrade`, `lanes=N`,
    /// `head_cache=N` and `upgrade_from=2` in its query are the store's own options (see
    /// `RedisOptions`), checked when it opens.
    Redis(String),
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]` or `rediss+cluster://…`: the Redis store on
    /// the Redis Cluster those nodes belong to (feature `redis`). Credentials, if any, come
    /// before the first host and hold for every node.
    RedisCluster(String),
    /// `postgres://…` or `postgresql://…`: the PostgreSQL store at that URL (feature
    /// `postgres`); `schema=NAME`, `pool_size=N` and `head_cache=N` in its query are the
    /// store's own options,
    /// and `sslmode`/`sslrootcert` choose TLS as in libpq.
    Postgres(String),
}

/// A store spelling that is not one of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreUrlError {
    /// Not a spelling of any store.
    #[error("unknown store {url:?}; {EXPECTED}")]
    Unknown {
        /// What was given.
        url: String,
    },
    /// `file:` with nothing after it.
    #[error("store {url:?} names no folder; write file:PATH, or file for the data folder")]
    NoFolder {
        /// What was given.
        url: String,
    },
}

impl StoreUrl {
    /// Parses a store spelling; the error says which forms are accepted.
    pub fn parse(text: &str) -> Result<Self, StoreUrlError> {
        if text == "memory" {
            return Ok(Self::Memory);
        }
        if text == "file" {
            return Ok(Self::DataFolder);
        }
        if text == TEMP_FOLDER_URL {
            return Ok(Self::TempFolder);
        }
        if let Some(path) = text.strip_prefix("file:") {
            if path.is_empty() {
                return Err(StoreUrlError::NoFolder { url: text.into() });
            }
            return Ok(Self::Folder(path.into()));
        }
        if text.starts_with("redis://") || text.starts_with("rediss://") {
            return Ok(Self::Redis(text.to_owned()));
        }
        if text.starts_with("redis+cluster://") || text.starts_with("rediss+cluster://") {
            return Ok(Self::RedisCluster(text.to_owned()));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Self::Postgres(text.to_owned()));
        }
        Err(StoreUrlError::Unknown { url: text.into() })
    }

    /// Whether this names a JSON file store (in any folder).
    pub fn is_file(&self) -> bool {
        matches!(self, Self::DataFolder | Self::Folder(_) | Self::TempFolder)
    }
}

impl FromStr for StoreUrl {
    type Err = StoreUrlError;

    fn from_str(text: &str) -> Result<Self, StoreUrlError> {
        Self::parse(text)
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("memory"),
            Self::DataFolder => f.write_str("file"),
            // A folder named exactly `tmp` is printed so that it does not read as `file:tmp`.
            Self::Folder(path) if path.as_os_str() == "tmp" => f.write_str("file:./tmp"),
            Self::Folder(path) => write!(f, "file:{}", path.display()),
            Self::TempFolder => f.write_str(TEMP_FOLDER_URL),
            Self::Redis(url) | Self::RedisCluster(url) | Self::Postgres(url) => {
                f.write_str(&redact(url))
            }
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

impl StoreUrl {
    /// The spelling with its password, if any: parses back to the same value. For handing to a
    /// process that must open the same store; never for a log line or a report.
    pub fn unredacted(&self) -> String {
        match self {
            Self::Redis(url) | Self::RedisCluster(url) | Self::Postgres(url) => url.clone(),
            other => other.to_string(),
        }
    }
}

/// `scheme://user:password@host…` with the password replaced by `***`; anything else unchanged.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password never reaches an error, a report or a log line; the child process still gets
    /// it.
    #[test]
    fn passwords_are_redacted_in_display_and_debug_only() {
        let url = StoreUrl::parse("redis://app:s3cret@127.0.0.1:6379/2").unwrap();
        assert_eq!(url.to_string(), "redis://app:***@127.0.0.1:6379/2");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(url.unredacted(), "redis://app:s3cret@127.0.0.1:6379/2");
        assert_eq!(StoreUrl::parse(&url.unredacted()).unwrap(), url);
        let plain = StoreUrl::parse("redis://127.0.0.1:6379").unwrap();
        assert_eq!(plain.to_string(), "redis://127.0.0.1:6379");
        let cluster = StoreUrl::parse("redis+cluster://app:s3cret@h1:7000,h2:7001").unwrap();
        assert_eq!(
            cluster.to_string(),
            "redis+cluster://app:***@h1:7000,h2:7001"
        );
        assert_eq!(StoreUrl::parse(&cluster.unredacted()).unwrap(), cluster);
        let user_only = StoreUrl::parse("rediss://app@h:1").unwrap();
        assert_eq!(user_only.to_string(), "rediss://app@h:1");
    }

    #[test]
    fn every_form_parses_and_prints_back_the_same() {
        let cases = [
            ("memory", StoreUrl::Memory),
            ("file", StoreUrl::DataFolder),
            ("file:tmp", StoreUrl::TempFolder),
            ("file:./tmp", StoreUrl::Folder("./tmp".into())),
            ("file:/var/lib/t", StoreUrl::Folder("/var/lib/t".into())),
            (
                "redis://127.0.0.1:6379",
                StoreUrl::Redis("redis://127.0.0.1:6379".into()),
            ),
            ("rediss://h:1/2", StoreUrl::Redis("rediss://h:1/2".into())),
            (
                "redis+cluster://h1:7000,h2:7001",
                StoreUrl::RedisCluster("redis+cluster://h1:7000,h2:7001".into()),
            ),
            (
                "postgres://u@h/db?schema=s",
                StoreUrl::Postgres("postgres://u@h/db?schema=s".into()),
            ),
            (
                "postgresql://h/d",
                StoreUrl::Postgres("postgresql://h/d".into()),
            ),
        ];
        for (text, url) in cases {
            assert_eq!(StoreUrl::parse(text), Ok(url.clone()), "{text}");
            assert_eq!(url.to_string(), text);
            assert_eq!(url.to_string().parse::<StoreUrl>(), Ok(url));
        }
    }

    #[test]
    fn a_folder_named_tmp_never_prints_as_the_temporary_folder() {
        let url = StoreUrl::Folder("tmp".into());
        assert_eq!(url.to_string(), "file:./tmp");
        assert_eq!(
            url.to_string().parse::<StoreUrl>(),
            Ok(StoreUrl::Folder("./tmp".into()))
        );
    }

    #[test]
    fn bad_spellings_say_what_is_accepted() {
        let err = StoreUrl::parse("mysql://db").unwrap_err();
        assert!(matches!(err, StoreUrlError::Unknown { .. }));
        assert!(
            err.to_string()
                .contains("expected memory, file, file:PATH, file:tmp"),
            "{err}"
        );
        for bad in ["", "Memory", "files", "redis:/x", "postgres:/x"] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
        let err = StoreUrl::parse("file:").unwrap_err();
        assert_eq!(
            err,
            StoreUrlError::NoFolder {
                url: "file:".into()
            }
        );
    }

    #[test]
    fn only_the_file_forms_are_file_stores() {
        assert!(StoreUrl::DataFolder.is_file() && StoreUrl::TempFolder.is_file());
        assert!(!StoreUrl::Memory.is_file() && !StoreUrl::Redis("redis://x".into()).is_file());
    }
}
