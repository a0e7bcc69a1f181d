//! Property: one file-store root is written by one process (or one open store) at a time, even
//! when its `turnstile.lock` is deleted while the store is open — as a "stale lock" clean-up
//! would. The folder itself is locked too, so a second open is refused with `Locked` and the
//! first store keeps working. Breaking it: locking only the lock file lets the second open in,
//! and two writers then corrupt every session they share.

use turnstile::{FileStore, SessionKey, Store, StoreError};

#[tokio::test]
async fn a_second_open_is_refused_after_the_lock_file_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let first = FileStore::open(&root).unwrap();
    let refused = FileStore::open(&root).unwrap_err();
    assert!(matches!(refused, StoreError::Locked { .. }), "{refused}");

    std::fs::remove_file(root.join("turnstile.lock")).unwrap();
    let refused = FileStore::open(&root).unwrap_err();
    assert!(
        matches!(refused, StoreError::Locked { .. }),
        "a deleted lock file must not let a second writer in: {refused}"
    );

    // The first store still works, and once it is gone the root opens again.
    let key = SessionKey::new("ana", "s").unwrap();
    assert!(first.load(&key, 10).await.unwrap().record.is_none());
    drop(first);
    FileStore::open(&root).expect("the root is free once its store is dropped");
}
