//! Property: one store root is open in one place at a time — a second `FileStore` on the same
//! root, in this process or another, is refused with `Locked` until the first is dropped.

use std::process::Command;

use turnstile::backend::FileStore;
use turnstile::StoreError;

/// Set in the child process: the root it should try to open.
const CHILD_ENV: &str = "TURNSTILE_LOCK_TEST_ROOT";

/// Serialises the two tests in this binary. A lock file's lock belongs to its open file
/// description, and a child forked by one test holds a copy of every open descriptor until it
/// calls `exec`; the in-process test would then see its root as still locked after the drop.
static FORKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_second_open_in_the_same_process_is_refused_until_the_first_is_dropped() {
    let _serial = FORKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let first = FileStore::open(dir.path()).expect("first open");
    match FileStore::open(dir.path()) {
        Err(StoreError::Locked { path, detail }) => {
            assert!(path.starts_with(dir.path()));
            assert!(detail.contains(&std::process::id().to_string()), "{detail}");
        }
        other => panic!("a second open must be refused, got {other:?}"),
    }
    drop(first);
    FileStore::open(dir.path()).expect("open after the first was dropped");
}

#[test]
fn another_process_cannot_open_a_root_in_use() {
    let _serial = FORKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let _held = FileStore::open(dir.path()).expect("open");
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child_tries_to_open",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("CHILD: locked"), "child said: {stdout}");
}

/// Not a test of its own: the child half of `another_process_cannot_open_a_root_in_use`.
#[test]
fn child_tries_to_open() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    match FileStore::open(root) {
        Err(StoreError::Locked { .. }) => println!("CHILD: locked"),
        other => println!("CHILD: unexpected {other:?}"),
    }
}
