//! The blocking file steps of [`super::FileArtifactStore`]: writing a version atomically,
//! reading versions and their headers, removing folders through the trash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{now_ms, Artifact, ArtifactError, ArtifactMeta, MAX_VERSIONS};
use crate::atomic_file::sync_dir;

/// Deleted folders are renamed in here first (one atomic step), then removed.
pub(super) const TRASH_DIR: &str = "trash";

/// Version files end with this; temporaries and strays do not.
const SUFFIX: &str = ".art";

/// Digits of a version in its file name: zero-padded, so names sort as versions do.
const VERSION_DIGITS: usize = 20;

/// Longest header line read: the name and type limits keep a real one under 1 KiB.
const MAX_HEADER: usize = 4096;

/// The first line of a version file.
#[derive(Serialize, Deserialize)]
struct Header {
    name: String,
    version: u64,
    mime: String,
    saved_ms: u64,
}

/// Wraps an I/O error with what was being done and where.
pub(super) fn io(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ArtifactError {
    let path = path.to_path_buf();
    move |source| ArtifactError::Io { op, path, source }
}

fn corrupt(path: &Path, what: &str) -> ArtifactError {
    ArtifactError::Corrupt {
        detail: format!("{}: {what}", path.display()),
    }
}

/// Opens a file for reading, refusing a symbolic link in its place.
fn open_read(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    no_follow(&mut options);
    options.open(path)
}

#[cfg(unix)]
fn no_follow(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW);
}

#[cfg(not(unix))]
fn no_follow(_options: &mut OpenOptions) {}

fn version_path(dir: &Path, version: u64) -> PathBuf {
    dir.join(format!("{version:0VERSION_DIGITS$}{SUFFIX}"))
}

/// The versions present in a name's folder, ascending; empty when the folder does not exist.
pub(super) fn version_numbers(dir: &Path) -> Result<Vec<u64>, ArtifactError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read folder", dir)(e)),
    };
    let mut versions = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io("read folder", dir))?;
        let name = entry.file_name();
        let Some(digits) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else {
            continue;
        };
        if digits.len() == VERSION_DIGITS {
            if let Ok(version) = digits.parse::<u64>() {
                versions.push(version);
            }
        }
    }
    versions.sort_unstable();
    Ok(versions)
}

/// Creates the folders from `root` down to `dir` that are missing, fsyncing each new one's
/// parent, so that a version fsync'd inside is reachable after a crash.
fn create_chain(root: &Path, dir: &Path) -> Result<(), ArtifactError> {
    let relative = dir
        .strip_prefix(root)
        .map_err(|_| corrupt(dir, "outside the root"))?;
    let mut at = root.to_path_buf();
    for part in relative.components() {
        at.push(part);
        match fs::create_dir(&at) {
            Ok(()) => {
                let parent = at.parent().unwrap_or(root);
                sync_dir(parent).map_err(io("fsync folder", parent))?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("create folder", &at)(e)),
        }
    }
    Ok(())
}

/// Writes the next version of a name: temporary file, fsync, rename, folder fsync. The caller
/// holds the user's write lock, so the version read here is not taken by another save.
pub(super) fn save_version(
    root: &Path,
    dir: &Path,
    scope: &str,
    name: &str,
    mime: &str,
    bytes: &[u8],
) -> Result<u64, ArtifactError> {
    create_chain(root, dir)?;
    let version = version_numbers(dir)?.last().copied().unwrap_or(0) + 1;
    if version > MAX_VERSIONS {
        return Err(ArtifactError::TooManyVersions {
            scope: scope.to_owned(),
            name: name.to_owned(),
        });
    }
    let header = Header {
        name: name.to_owned(),
        version,
        mime: mime.to_owned(),
        saved_ms: now_ms(),
    };
    let mut line = serde_json::to_vec(&header).map_err(|e| corrupt(dir, &e.to_string()))?;
    line.push(b'\n');
    let path = version_path(dir, version);
    let tmp = dir.join(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        no_follow(&mut options);
        let mut file = options.open(&tmp).map_err(io("create", &tmp))?;
        file.write_all(&line).map_err(io("write", &tmp))?;
        file.write_all(bytes).map_err(io("write", &tmp))?;
        file.sync_all().map_err(io("fsync", &tmp))?;
        fs::rename(&tmp, &path).map_err(io("rename into place", &path))
    })();
    if let Err(err) = written {
        // Best effort: a temporary is never read, so leaving it behind only costs space.
        let _ = fs::remove_file(&tmp);
        return Err(err);
    }
    sync_dir(dir).map_err(io("fsync folder", dir))?;
    Ok(version)
}

/// Reads a header from the start of an open version file; returns it and its length with the
/// newline.
fn read_header(file: &mut File, path: &Path) -> Result<(Header, usize), ArtifactError> {
    let mut head = Vec::with_capacity(512);
    Read::by_ref(file)
        .take(MAX_HEADER as u64)
        .read_to_end(&mut head)
        .map_err(io("read", path))?;
    let end = head
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| corrupt(path, "no header line"))?;
    let header: Header = serde_json::from_slice(&head[..end])
        .map_err(|e| corrupt(path, &format!("bad header: {e}")))?;
    Ok((header, end + 1))
}

fn meta_of(header: Header, bytes: u64) -> ArtifactMeta {
    ArtifactMeta {
        name: header.name,
        version: header.version,
        bytes,
        mime: header.mime,
        saved_ms: header.saved_ms,
    }
}

/// Opens one version; `None` when it does not exist.
fn open_version(dir: &Path, version: u64) -> Result<Option<(File, PathBuf)>, ArtifactError> {
    let path = version_path(dir, version);
    match open_read(&path) {
        Ok(file) => Ok(Some((file, path))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("open", &path)(e)),
    }
}

/// One version's metadata, reading only its header.
pub(super) fn read_meta(dir: &Path, version: u64) -> Result<ArtifactMeta, ArtifactError> {
    let (mut file, path) =
        open_version(dir, version)?.ok_or_else(|| corrupt(dir, "a version vanished"))?;
    let len = file.metadata().map_err(io("stat", &path))?.len();
    let (header, header_len) = read_header(&mut file, &path)?;
    check_version(&header, version, &path)?;
    Ok(meta_of(header, len.saturating_sub(header_len as u64)))
}

/// One version with its bytes; `None` when it does not exist. The bytes are read once into a
/// buffer of their exact size (the header's read-ahead is its first part): no second copy.
pub(super) fn read_version(dir: &Path, version: u64) -> Result<Option<Artifact>, ArtifactError> {
    let Some((mut file, path)) = open_version(dir, version)? else {
        return Ok(None);
    };
    let len = file.metadata().map_err(io("stat", &path))?.len();
    let mut head = Vec::with_capacity(MAX_HEADER);
    Read::by_ref(&mut file)
        .take(MAX_HEADER as u64)
        .read_to_end(&mut head)
        .map_err(io("read", &path))?;
    let end = head
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| corrupt(&path, "no header line"))?;
    let header: Header = serde_json::from_slice(&head[..end])
        .map_err(|e| corrupt(&path, &format!("bad header: {e}")))?;
    check_version(&header, version, &path)?;
    let size = usize::try_from(len.saturating_sub(end as u64 + 1)).unwrap_or(0);
    let mut data = Vec::with_capacity(size);
    data.extend_from_slice(&head[end + 1..]);
    file.read_to_end(&mut data).map_err(io("read", &path))?;
    Ok(Some(Artifact {
        meta: meta_of(header, data.len() as u64),
        data,
    }))
}

fn check_version(header: &Header, version: u64, path: &Path) -> Result<(), ArtifactError> {
    if header.version == version {
        Ok(())
    } else {
        Err(corrupt(path, "the header names another version"))
    }
}

/// The newest version of every name in a scope's folder.
pub(super) fn newest_of_each(dir: &Path) -> Result<Vec<ArtifactMeta>, ArtifactError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read folder", dir)(e)),
    };
    let mut metas = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io("read folder", dir))?;
        let kind = entry.file_type().map_err(io("stat", &entry.path()))?;
        if !kind.is_dir() {
            continue;
        }
        let name_dir = entry.path();
        if let Some(&newest) = version_numbers(&name_dir)?.last() {
            metas.push(read_meta(&name_dir, newest)?);
        }
    }
    Ok(metas)
}

/// Counts the version files under `dir`, never following a symbolic link.
fn count_versions(dir: &Path) -> Result<u64, ArtifactError> {
    let mut count = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).map_err(io("read folder", &at))? {
            let entry = entry.map_err(io("read folder", &at))?;
            let kind = entry.file_type().map_err(io("stat", &entry.path()))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() && entry.file_name().to_string_lossy().ends_with(SUFFIX) {
                count += 1;
            }
        }
    }
    Ok(count)
}

/// Removes a folder as one durable step (renamed into the trash, then deleted) and returns how
/// many versions it held; 0 when it does not exist.
pub(super) fn remove_tree(root: &Path, dir: &Path) -> Result<u64, ArtifactError> {
    let count = match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => count_versions(dir)?,
        Ok(_) => return Err(corrupt(dir, "not a folder")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io("stat", dir)(e)),
    };
    let trash = root.join(TRASH_DIR);
    create_chain(root, &trash)?;
    let target = trash.join(uuid::Uuid::new_v4().simple().to_string());
    fs::rename(dir, &target).map_err(io("move to trash", dir))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent).map_err(io("fsync folder", parent))?;
    }
    fs::remove_dir_all(&target).map_err(io("remove", &target))?;
    Ok(count)
}

/// Removes what a crash left in the trash.
pub(super) fn empty_trash(trash: &Path) -> Result<(), ArtifactError> {
    match fs::remove_dir_all(trash) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("empty trash", trash)(e)),
    }
}
