//! Where the file store puts things: folder names for ids, and the paths of every file.
//!
//! Computing a path touches nothing; two functions look at the disk: [`all_user_dirs`] lists
//! the user folders and [`refuse_links`] checks a path for planted links.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::key::SessionKey;
use crate::store::StoreError;

/// The folder of a file backend's artifacts, inside its root.
pub const ARTIFACTS_FOLDER: &str = "artifacts";

/// The folder of a file backend's memory across sessions, inside its root.
pub const MEMORY_FOLDER: &str = "memory";

/// Longest folder name the encoder emits. File systems allow 255 bytes per name component;
/// staying well below leaves room for editors' and tools' temporary suffixes.
pub(super) const MAX_NAME_BYTES: usize = 200;

/// How much of the readable encoding a hashed name keeps in front of its hash, so that a person
/// listing the folder still recognises the id.
const HASHED_PREFIX_BYTES: usize = 120;

/// Separates the readable prefix from the hash in a hashed name. The plain encoding never emits
/// it (`~` is escaped), so a hashed name can never equal the plain name of another id.
const HASH_MARK: char = '~';

/// The lock file that keeps a second process out of a store root.
pub(super) const LOCK_FILE: &str = "turnstile.lock";
/// Application-wide (`app:`) state, at the root.
pub(super) const APP_FILE: &str = "app.json";
/// A user's shared (`user:`) state, in the user's folder.
pub(super) const USER_FILE: &str = "user.json";
/// A session's head (the fold of its log), in the session's folder.
pub(super) const HEAD_FILE: &str = "head.json";
/// A session's append-only log, one event per line.
pub(super) const LOG_FILE: &str = "log.jsonl";
/// Named users' folders live in here.
const USERS_DIR: &str = "users";
/// Anonymous sessions have no user; their folder sits beside `users/`, so no user id can reach it.
const ANONYMOUS_DIR: &str = "anonymous";
/// Sessions of one user, inside the user's folder.
pub(super) const SESSIONS_DIR: &str = "sessions";
/// Deleted folders are renamed in here first (one atomic step), then removed: a crash halfway
/// through a removal must not leave a log behind that would resurrect the session.
pub(super) const TRASH_DIR: &str = "trash";

/// Encodes an id as a folder name that cannot escape its parent or collide with another id.
///
/// Bytes `a-z`, `0-9`, `_` and `-` are kept; every other byte becomes `%` and two lowercase hex
/// digits. So the name never contains `/`, `\`, `.` (hence never `.` or `..`), upper case (so it
/// is also unique on case-insensitive file systems) or control characters. A name that would be
/// longer than [`MAX_NAME_BYTES`] keeps a readable prefix followed by `~` and the SHA-256 of the
/// id; the real id is then read back from the files inside.
pub fn encode_name(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(hex_digit(byte >> 4));
            out.push(hex_digit(byte & 0x0f));
        }
    }
    if out.len() <= MAX_NAME_BYTES {
        return out;
    }
    // Cut on an escape boundary so the prefix stays decodable by eye.
    let mut cut = HASHED_PREFIX_BYTES;
    while out.as_bytes().get(cut.saturating_sub(1)) == Some(&b'%')
        || out.as_bytes().get(cut.saturating_sub(2)) == Some(&b'%')
    {
        cut -= 1;
    }
    out.truncate(cut);
    out.push(HASH_MARK);
    for byte in Sha256::digest(id.as_bytes()) {
        out.push(hex_digit(byte >> 4));
        out.push(hex_digit(byte & 0x0f));
    }
    out
}

/// Decodes a name made by [`encode_name`]. `None` for hashed names (read the id from the files)
/// and for names the encoder never makes (stray files, editors' backups).
pub fn decode_name(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex_value(*bytes.get(i + 1)?)?;
                let lo = hex_value(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b @ (b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-') => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    let id = String::from_utf8(out).ok()?;
    // Only canonical names decode, so that one id never has two folders.
    (!id.is_empty() && encode_name(&id) == name).then_some(id)
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

/// The folder that holds a user's sessions and shared state; anonymous sessions get their own.
pub(super) fn user_dir(root: &Path, user_id: &str) -> PathBuf {
    if user_id.is_empty() {
        root.join(ANONYMOUS_DIR)
    } else {
        root.join(USERS_DIR).join(encode_name(user_id))
    }
}

/// The folder that holds a user's session folders.
pub(super) fn sessions_dir(root: &Path, user_id: &str) -> PathBuf {
    user_dir(root, user_id).join(SESSIONS_DIR)
}

/// Every folder that may hold session folders: one per user, plus the anonymous one.
pub(super) fn all_user_dirs(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = vec![root.join(ANONYMOUS_DIR)];
    match std::fs::read_dir(root.join(USERS_DIR)) {
        Ok(entries) => {
            for entry in entries {
                dirs.push(entry?.path());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(dirs)
}

/// A session's folder relative to the root, as the journal names it: the same folder as
/// [`sessions_dir`] joined with the session's encoded id, built as one string (an append names
/// its log and head this way without joining and stripping the root).
pub(super) fn session_dir_relative(key: &SessionKey) -> PathBuf {
    let session = encode_name(key.session_id());
    let user = (!key.is_anonymous()).then(|| encode_name(key.user_id()));
    // `users/<user>/sessions/<session>` or `anonymous/sessions/<session>`.
    let len = match &user {
        Some(user) => USERS_DIR.len() + 1 + user.len(),
        None => ANONYMOUS_DIR.len(),
    } + 1
        + SESSIONS_DIR.len()
        + 1
        + session.len();
    let mut dir = String::with_capacity(len);
    match &user {
        Some(user) => {
            dir.push_str(USERS_DIR);
            dir.push('/');
            dir.push_str(user);
        }
        None => dir.push_str(ANONYMOUS_DIR),
    }
    dir.push('/');
    dir.push_str(SESSIONS_DIR);
    dir.push('/');
    dir.push_str(&session);
    debug_assert_eq!(dir.len(), len);
    PathBuf::from(dir)
}

/// The files of one session.
#[derive(Debug, Clone)]
pub(super) struct SessionPaths {
    /// The session's folder.
    pub dir: PathBuf,
    /// Its head.
    pub head: PathBuf,
    /// Its log.
    pub log: PathBuf,
}

impl SessionPaths {
    /// The paths of `key` under `root`.
    pub(super) fn of(root: &Path, key: &SessionKey) -> Self {
        Self::in_dir(root.join(session_dir_relative(key)))
    }

    /// The paths of the session whose folder is `dir`.
    pub(super) fn in_dir(dir: PathBuf) -> Self {
        Self {
            head: dir.join(HEAD_FILE),
            log: dir.join(LOG_FILE),
            dir,
        }
    }
}

/// Refuses to write through a symbolic link anywhere below `root` on the way to any of `paths`
/// (`root` itself may be a link an operator made on purpose): a link planted inside the store
/// would send its writes elsewhere. Parts that do not exist yet are fine; they are made as real
/// folders and files. Each path is looked at from the root down, and only as far as its first
/// part that cannot be looked at (missing, usually: nothing below it exists to be a link); a
/// folder shared by several paths is looked at once. A path not under `root`, spelled as given
/// (`root.join(…)`), is not looked at at all.
pub fn refuse_links(root: &Path, paths: &[&Path]) -> Result<(), StoreError> {
    // Parts seen to be real folders or files, and parts that could not be looked at.
    let mut real: Vec<PathBuf> = Vec::with_capacity(6);
    let mut missing: Vec<PathBuf> = Vec::new();
    for &path in paths {
        let Ok(below) = path.strip_prefix(root) else {
            continue;
        };
        let mut part = root.to_path_buf();
        for component in below.components() {
            part.push(component);
            if missing.contains(&part) {
                break;
            }
            if real.contains(&part) {
                continue;
            }
            match std::fs::symlink_metadata(&part) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(StoreError::Corrupt {
                        key: path.display().to_string(),
                        detail: format!(
                            "{} is a symbolic link; the store never follows links inside its \
                             root (nothing was written, the link was left in place)",
                            part.display()
                        ),
                    });
                }
                Ok(_) => real.push(part.clone()),
                Err(_) => {
                    missing.push(part);
                    break;
                }
            }
        }
    }
    Ok(())
}

/// The folders from `root` down to a session's folder, each of which may need creating.
pub(super) fn session_dir_chain(root: &Path, key: &SessionKey) -> Vec<PathBuf> {
    let user = user_dir(root, key.user_id());
    let mut chain = Vec::with_capacity(4);
    if !key.is_anonymous() {
        chain.push(root.join(USERS_DIR));
    }
    chain.push(user.clone());
    let sessions = user.join(SESSIONS_DIR);
    chain.push(sessions.clone());
    chain.push(sessions.join(encode_name(key.session_id())));
    chain
}

/// The store root [`super::FileStore::open_default`] uses: `$TURNSTILE_HOME`, else
/// `$XDG_DATA_HOME/turnstile`, else `$HOME/.local/share/turnstile`. Empty variables count as
/// unset, as the XDG specification asks.
pub(super) fn default_root(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(home) = set("TURNSTILE_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(data) = set("XDG_DATA_HOME") {
        return Some(PathBuf::from(data).join("turnstile"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".local/share/turnstile"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_safe_bytes_and_escape_the_rest() {
        assert_eq!(encode_name("alice-1_x"), "alice-1_x");
        assert_eq!(encode_name("../a"), "%2e%2e%2fa");
        assert_eq!(encode_name("A"), "%41");
        assert_eq!(encode_name("~"), "%7e");
        assert_eq!(encode_name("é"), "%c3%a9");
        for id in ["../a", "A", "é", "x y", "%2F", "a\\b", "C123|T9|1700.1"] {
            assert_eq!(decode_name(&encode_name(id)).as_deref(), Some(id));
        }
    }

    #[test]
    fn names_never_contain_path_syntax_or_upper_case() {
        for id in ["..", ".", "/", "\\", "a/../../b", "CON", "Ab", "%"] {
            let name = encode_name(id);
            assert!(!name.contains(['/', '\\', '.']), "{name}");
            assert!(!name.chars().any(|c| c.is_ascii_uppercase()), "{name}");
            assert!(name != "." && name != ".." && !name.is_empty());
        }
    }

    #[test]
    fn long_names_are_hashed_below_the_limit_and_stay_distinct() {
        let a = "é".repeat(128);
        let b = format!("{}x", "é".repeat(127));
        let (na, nb) = (encode_name(&a), encode_name(&b));
        assert!(na.len() <= MAX_NAME_BYTES, "{}", na.len());
        assert!(na.contains(HASH_MARK));
        assert_ne!(na, nb);
        assert_eq!(
            decode_name(&na),
            None,
            "hashed names are read from the files"
        );
        let plain = "x".repeat(MAX_NAME_BYTES);
        assert_eq!(encode_name(&plain), plain);
        assert!(encode_name(&"x".repeat(MAX_NAME_BYTES + 1)).contains(HASH_MARK));
    }

    #[test]
    fn stray_names_do_not_decode() {
        for name in ["", "A", "%2", "%zz", "%2E", "a.b", "x~y", "%c3"] {
            assert_eq!(decode_name(name), None, "{name}");
        }
    }

    #[test]
    fn anonymous_sessions_live_apart_from_every_user() {
        let root = Path::new("/r");
        let anon = SessionKey::anonymous("s").unwrap();
        let named = SessionKey::new("anonymous", "s").unwrap();
        assert_ne!(
            SessionPaths::of(root, &anon).dir,
            SessionPaths::of(root, &named).dir
        );
        assert_eq!(
            SessionPaths::of(root, &anon).dir,
            Path::new("/r/anonymous/sessions/s")
        );
        assert_eq!(
            session_dir_chain(root, &named).last(),
            Some(&PathBuf::from("/r/users/anonymous/sessions/s"))
        );
    }

    #[test]
    fn a_sessions_relative_folder_is_the_folder_the_listing_finds() {
        let long = "Ü".repeat(100);
        let root = Path::new("/r/store");
        for key in [
            SessionKey::new("u", "s").unwrap(),
            SessionKey::new("User.Name", "a/b c").unwrap(),
            SessionKey::new(&long, &long).unwrap(),
            SessionKey::anonymous("s:1").unwrap(),
        ] {
            let relative = session_dir_relative(&key);
            let listed = sessions_dir(root, key.user_id()).join(encode_name(key.session_id()));
            assert_eq!(root.join(&relative), listed, "{key}");
            assert_eq!(SessionPaths::of(root, &key).dir, listed, "{key}");
            // Names only, as the journal requires of its paths.
            assert!(relative
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_))));
            assert_eq!(
                relative.components().count(),
                4 - usize::from(key.user_id().is_empty())
            );
        }
    }

    #[test]
    fn the_default_root_follows_the_documented_order() {
        fn env<'a>(
            pairs: &'a [(&'static str, &'static str)],
        ) -> impl Fn(&str) -> Option<OsString> + 'a {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        }
        let all = [
            ("TURNSTILE_HOME", "/t"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(default_root(env(&all)), Some(PathBuf::from("/t")));
        assert_eq!(
            default_root(env(&[("TURNSTILE_HOME", ""), ("XDG_DATA_HOME", "/x")])),
            Some(PathBuf::from("/x/turnstile"))
        );
        assert_eq!(
            default_root(env(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/share/turnstile"))
        );
        assert_eq!(default_root(env(&[])), None);
    }

    /// What a refusal says (it names the link first).
    fn refused_at(result: Result<(), StoreError>) -> String {
        match result {
            Err(StoreError::Corrupt { detail, .. }) => detail,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_link_at_any_depth_below_the_root_is_refused_and_missing_parts_are_fine() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        // The root itself may be a link.
        let real_root = tmp.path().join("real-root");
        std::fs::create_dir(&real_root).unwrap();
        let root = tmp.path().join("root");
        std::os::unix::fs::symlink(&real_root, &root).unwrap();
        let folders = ["users", "users/u", "users/u/sessions", "users/u/sessions/s"];
        let log = root.join("users/u/sessions/s/log.jsonl");
        let head = root.join("users/u/sessions/s/head.json");
        // Nothing below the root exists yet, then each folder in turn.
        assert!(refuse_links(&root, &[&log, &head]).is_ok());
        for folder in folders {
            std::fs::create_dir(root.join(folder)).unwrap();
            assert!(refuse_links(&root, &[&log, &head]).is_ok(), "{folder}");
        }
        // A link in place of each folder in turn, then of the last file, is refused by name.
        // Each points nowhere (a dangling link); the next test's points to a real folder.
        let aside = tmp.path().join("aside");
        let last_file = "users/u/sessions/s/head.json";
        for part in folders.iter().copied().chain([last_file]) {
            let path = root.join(part);
            let folder = path.is_dir();
            if folder {
                std::fs::rename(&path, &aside).unwrap();
            }
            std::os::unix::fs::symlink(tmp.path().join("nowhere"), &path).unwrap();
            let detail = refused_at(refuse_links(&root, &[&log, &head]));
            assert!(detail.starts_with(&format!("{} is a symbolic link", path.display())));
            std::fs::remove_file(&path).unwrap();
            if folder {
                std::fs::rename(&aside, &path).unwrap();
            }
        }
        // A path outside the root is not this check's business.
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("outside")).unwrap();
        assert!(refuse_links(&root, &[&tmp.path().join("outside/x")]).is_ok());
    }

    #[test]
    fn a_part_missing_on_one_path_does_not_hide_a_link_on_another() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("users/a")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("users/b")).unwrap();
        let missing = root.join("users/a/missing/x");
        let linked = root.join("users/b/x");
        for paths in [[&missing, &linked], [&linked, &missing]] {
            let detail = refused_at(refuse_links(&root, &paths.map(PathBuf::as_path)));
            assert!(detail.contains("users/b is a symbolic link"), "{detail}");
        }
    }
}
