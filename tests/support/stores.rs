//! Helpers for store tests: file stores in temporary folders, and looking at what they wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use turnstile::backend::FileStore;

/// A file store in a new temporary folder; the folder is removed when the guard drops.
pub fn temp_file_store() -> (tempfile::TempDir, FileStore) {
    let dir = tempfile::tempdir().expect("create a temporary folder");
    let store = FileStore::open(dir.path()).expect("open a file store");
    (dir, store)
}

/// Every file and folder under `root`, recursively, without following symlinks.
pub fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a folder") {
            let entry = entry.expect("read a folder entry");
            let path = entry.path();
            if entry.file_type().expect("file type").is_dir() {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out
}

/// The only file named `name` under `root`.
pub fn find_one(root: &Path, name: &str) -> PathBuf {
    let found: Vec<PathBuf> = walk(root)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == name))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {name} under {}",
        root.display()
    );
    found.into_iter().next().expect("one file")
}

/// Every path under `root` with the SHA-256 of its contents (`None` for a folder), so that two
/// snapshots differ if any file was added, removed or changed, not only renamed.
pub fn contents(root: &Path) -> BTreeMap<PathBuf, Option<String>> {
    walk(root)
        .into_iter()
        .map(|path| {
            let hash = path.is_file().then(|| {
                let bytes = std::fs::read(&path).expect("read a file");
                Sha256::digest(&bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            });
            (path, hash)
        })
        .collect()
}
