//! Property: no session key, however hostile, makes the file store create, read or remove
//! anything outside its root, and every name it creates fits a file system's limits.

mod support;

use std::sync::Arc;

use turnstile::backend::FileStore;
use turnstile::key::MAX_ID_BYTES;
use turnstile::store::conformance::turn_events;
use turnstile::store::PageRequest;
use turnstile::{SessionKey, Store};

#[tokio::test]
async fn hostile_keys_create_nothing_outside_the_root() {
    let outer = tempfile::tempdir().expect("tempdir");
    let root = outer.path().join("root");
    let store = Arc::new(FileStore::open(&root).expect("open"));
    let long = "é".repeat(MAX_ID_BYTES / 2);
    let ids = [
        "..",
        ".",
        "../..",
        "../../etc/passwd",
        "/abs",
        "a/b",
        "a\\b",
        "C:\\x",
        "~",
        "~root",
        ".hidden",
        "a. ",
        "CON",
        "nul",
        "%2e%2e",
        "%2F",
        "*",
        "{x}",
        " ",
        "ü/../ü",
        &long,
    ];
    for user in ids {
        for session in ids {
            let key = SessionKey::new(user, session).expect("valid key");
            store
                .append(&key, 0, &turn_events(1, "x", None))
                .await
                .expect("append");
            let loaded = store.load(&key, 5).await.expect("load");
            assert_eq!(loaded.record.expect("head").key, key);
        }
        let page = store
            .list(
                user,
                &PageRequest {
                    limit: 100,
                    cursor: None,
                },
            )
            .await
            .expect("list");
        assert_eq!(
            page.sessions.len(),
            ids.len(),
            "user {user:?} sees exactly its sessions"
        );
    }
    let outside: Vec<_> = std::fs::read_dir(outer.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(outside, ["root"], "nothing was created beside the root");
    let root = root.canonicalize().expect("canonical root");
    for path in support::stores::walk(&root) {
        let real = path.canonicalize().expect("canonical path");
        assert!(
            real.starts_with(&root),
            "{} escaped the root",
            path.display()
        );
        let name = path.file_name().expect("name").len();
        assert!(name <= 200, "{} has a {name}-byte name", path.display());
    }
    for user in ids {
        assert_eq!(
            store.delete_user(user).await.expect("delete_user"),
            ids.len() as u64
        );
    }
    assert!(root.exists(), "deleting every user leaves the root itself");
}
