//! Artifacts: named, versioned blobs (a generated report, an uploaded image) that belong to a
//! session or to a user. They are not events: the session's log records only that version N of
//! a name was saved (`artifact_saved`), the bytes live in an [`ArtifactStore`].
//!
//! The stores: [`MemoryArtifactStore`] (tests, demos), [`FileArtifactStore`] (one file per
//! version, written atomically) and, with the `redis` feature, [`RedisArtifactStore`]. Every one
//! passes the same conformance suite (`conformance`, with the `testing` feature). See
//! `docs/artifacts.md`.

use async_trait::async_trait;

use crate::key::{validate_id, KeyError, KeyPart, SessionKey};

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
mod memory;

pub use memory::MemoryArtifactStore;

/// Longest accepted artifact name, in bytes. Long enough for any file name a person or a tool
/// gives; short enough that a name, once encoded for a file system, fits one path component.
pub const MAX_NAME_BYTES: usize = 200;

/// Longest accepted MIME type, in bytes: the longest registered types are well under 128.
pub const MAX_MIME_BYTES: usize = 255;

/// Default size limit of one artifact version: 16 MiB. Big enough for reports, images and
/// documents a chat turn produces or receives; small enough that one upload cannot exhaust a
/// server's memory or a Redis node (which holds whole values in RAM). Change it per store.
pub const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Most versions one name may have. Versions are never pruned by the store; past this a save is
/// refused ([`ArtifactError::TooManyVersions`]) so that one name cannot grow without bound.
pub const MAX_VERSIONS: u64 = 100_000;

/// A turn's artifact name with this prefix is in the user's scope (shared by the user's
/// sessions), any other in the session's; the same prefix as `user:` state keys. Stores never
/// see it: it is stripped before the name reaches them.
pub const USER_SCOPE_PREFIX: &str = "user:";

/// Whom an artifact belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArtifactScope {
    /// One session; removed with it.
    Session(SessionKey),
    /// A user, shared by all the user's sessions; removed with the user.
    User(String),
}

impl ArtifactScope {
    /// A user's scope; the id follows the rules of [`SessionKey`] user ids (and anonymous
    /// sessions, which have no user, have no user scope).
    pub fn user(user_id: impl Into<String>) -> Result<Self, KeyError> {
        let user_id = user_id.into();
        validate_id(&user_id, KeyPart::User)?;
        Ok(Self::User(user_id))
    }

    /// The user the scope belongs to (empty for an anonymous session).
    pub fn user_id(&self) -> &str {
        match self {
            Self::Session(key) => key.user_id(),
            Self::User(user) => user,
        }
    }
}

impl std::fmt::Display for ArtifactScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Session(key) => write!(f, "session {key}"),
            Self::User(user) => write!(f, "user {user:?}"),
        }
    }
}

/// What is known of one stored version, without its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArtifactMeta {
    /// The artifact's name.
    pub name: String,
    /// The version: 1 for the first save of a name, one more for each later save.
    pub version: u64,
    /// Size of the bytes.
    pub bytes: u64,
    /// The MIME type given when it was saved.
    pub mime: String,
    /// When it was saved, Unix milliseconds.
    pub saved_ms: u64,
}

/// One stored version with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Name, version, size, type.
    pub meta: ArtifactMeta,
    /// The bytes as saved.
    pub data: Vec<u8>,
}

/// An artifact store failure. Every variant names what it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The name breaks a naming rule; nothing was read or written.
    #[error("artifact name {name:?} is refused: {reason}")]
    InvalidName {
        /// The name (cut to [`MAX_NAME_BYTES`] for the message).
        name: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// The MIME type is empty, too long or not printable ASCII.
    #[error("MIME type {mime:?} is refused: give 1..={MAX_MIME_BYTES} printable ASCII characters, such as `text/plain`")]
    InvalidMime {
        /// The type (cut for the message).
        mime: String,
    },
    /// The user id of a scope is not valid.
    #[error("invalid artifact scope: {0}")]
    InvalidScope(#[from] KeyError),
    /// The bytes exceed the store's size limit; nothing was written.
    #[error("artifact {name:?} is {bytes} bytes (or more); the limit is {limit} bytes")]
    TooLarge {
        /// The name.
        name: String,
        /// Its size, or as much of it as was read before the limit was passed.
        bytes: u64,
        /// The store's limit.
        limit: u64,
    },
    /// The name already has [`MAX_VERSIONS`] versions; delete it before saving more.
    #[error("artifact {name:?} in {scope} has {MAX_VERSIONS} versions, the most one name may have; delete it first")]
    TooManyVersions {
        /// The scope.
        scope: String,
        /// The name.
        name: String,
    },
    /// Stored data could not be read; it was left in place.
    #[error("artifact store: stored data is corrupt ({detail}); it was left in place")]
    Corrupt {
        /// What is wrong, where.
        detail: String,
    },
    /// The backend could not be reached or did not answer in time.
    #[error("{backend} artifact store is unavailable: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// Why.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The runtime (or the turn's context) was built without an artifact store.
    #[error("no artifact store is configured: call RuntimeBuilder::with_artifacts")]
    NotConfigured,
    /// Another process has the folder open.
    #[error("artifact folder {path} is in use by another process")]
    Locked {
        /// The folder.
        path: std::path::PathBuf,
    },
}

/// Where artifacts are kept: named, versioned blobs per session or per user.
///
/// Object-safe (`Arc<dyn ArtifactStore>`); every method validates the name first
/// ([`validate_name`]) and touches only the scope it is given. Versions of a name start at 1 and
/// grow by one per save; old versions stay loadable until the name, its scope or its user is
/// deleted. After a name is deleted, its next save is version 1 again.
#[async_trait]
pub trait ArtifactStore: Send + Sync + std::fmt::Debug + 'static {
    /// A short name for messages: `memory`, `file`, `redis`.
    fn name(&self) -> &'static str;

    /// The largest version this store accepts, in bytes.
    fn max_bytes(&self) -> u64;

    /// Stores `bytes` as the next version of `name` in `scope` and returns that version.
    ///
    /// Durable when it returns (the file store has fsync'd it). Two saves of one name never get
    /// the same version. Refused without writing: a bad name or MIME type, more than
    /// [`ArtifactStore::max_bytes`] ([`ArtifactError::TooLarge`]), a name with
    /// [`MAX_VERSIONS`] versions.
    async fn save(
        &self,
        scope: &ArtifactScope,
        name: &str,
        bytes: &[u8],
        mime: &str,
    ) -> Result<u64, ArtifactError>;

    /// Reads one version (`Some(n)`) or the newest (`None`); `Ok(None)` when there is none.
    async fn load(
        &self,
        scope: &ArtifactScope,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Artifact>, ArtifactError>;

    /// Every name in `scope` with its newest version, ordered by name.
    async fn list(&self, scope: &ArtifactScope) -> Result<Vec<ArtifactMeta>, ArtifactError>;

    /// Every version of `name`, oldest first; empty when the name has none.
    async fn versions(
        &self,
        scope: &ArtifactScope,
        name: &str,
    ) -> Result<Vec<ArtifactMeta>, ArtifactError>;

    /// Deletes every version of `name` (`Some`) or everything in `scope` (`None`). Returns how
    /// many versions were removed (0 when there was nothing).
    async fn delete(&self, scope: &ArtifactScope, name: Option<&str>)
        -> Result<u64, ArtifactError>;

    /// Deletes everything of a user: the user's scope and the scope of every session of the
    /// user. Touches no other user. Returns how many versions were removed.
    async fn delete_user(&self, user_id: &str) -> Result<u64, ArtifactError>;
}

/// Checks an artifact name: 1..=[`MAX_NAME_BYTES`] bytes, no `/`, `\`, `..`, NUL or other
/// control characters, and not `.`.
pub fn validate_name(name: &str) -> Result<(), ArtifactError> {
    let refuse = |reason| ArtifactError::InvalidName {
        name: shorten(name, MAX_NAME_BYTES),
        reason,
    };
    if name.is_empty() {
        return Err(refuse("it is empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(refuse("it is longer than 200 bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err(refuse(
            "it contains a control character (NUL, newline, tab…)",
        ));
    }
    if name.contains(['/', '\\']) {
        return Err(refuse("it contains a slash or a backslash"));
    }
    if name.contains("..") || name == "." {
        return Err(refuse("it contains `..` or is `.`"));
    }
    Ok(())
}

/// Checks a MIME type: 1..=[`MAX_MIME_BYTES`] printable ASCII characters.
pub fn validate_mime(mime: &str) -> Result<(), ArtifactError> {
    let ok = !mime.is_empty()
        && mime.len() <= MAX_MIME_BYTES
        && mime.bytes().all(|b| (0x20..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ArtifactError::InvalidMime {
            mime: shorten(mime, MAX_MIME_BYTES),
        })
    }
}

/// The checks every save makes before touching storage.
pub(crate) fn check_save(
    name: &str,
    bytes: &[u8],
    mime: &str,
    limit: u64,
) -> Result<(), ArtifactError> {
    validate_name(name)?;
    validate_mime(mime)?;
    let size = bytes.len() as u64;
    if size > limit {
        return Err(ArtifactError::TooLarge {
            name: name.to_owned(),
            bytes: size,
            limit,
        });
    }
    Ok(())
}

/// Refuses a scope whose user id is not valid (a [`ArtifactScope::User`] built by hand).
pub(crate) fn check_scope(scope: &ArtifactScope) -> Result<(), ArtifactError> {
    if let ArtifactScope::User(user) = scope {
        validate_id(user, KeyPart::User)?;
    }
    Ok(())
}

/// `text` cut to at most `max` bytes on a character boundary.
fn shorten(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Now, Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused_and_ordinary_ones_pass() {
        for bad in [
            "",
            ".",
            "..",
            "a/../b",
            "../x",
            "a/b",
            "a\\b",
            "nul\0",
            "line\nbreak",
        ] {
            assert!(
                matches!(validate_name(bad), Err(ArtifactError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        let long = "x".repeat(10_000);
        let err = validate_name(&long).unwrap_err();
        assert!(err.to_string().len() < 400, "the message is cut: {err}");
        for good in ["report.pdf", "a b", "日本.txt", ".hidden", "v1.2"] {
            validate_name(good).unwrap();
        }
    }

    #[test]
    fn mime_types_must_be_printable_ascii() {
        validate_mime("text/plain; charset=utf-8").unwrap();
        for bad in ["", "text/\nplain", "é"] {
            assert!(validate_mime(bad).is_err(), "{bad:?}");
        }
    }
}
