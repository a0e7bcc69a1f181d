//! Property: the file store never follows a symbolic link planted inside its root. A session
//! folder, a session's log or the app-state file replaced by a link to somewhere else makes the
//! write fail with a clear error naming the link (for a session's files written behind the
//! journal: the write behind fails, and the store stops taking writes until it is reopened
//! without the link); nothing is written at the link's target, and the link is left in place. Breaking it: writing through the link lands the turn outside the
//! store (the target file grows).

use std::path::Path;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

/// Finds the one folder under `root` whose name ends with `suffix`, however keys are encoded.
fn find(root: &Path, suffix: &str) -> std::path::PathBuf {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(suffix)
            {
                return path;
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    panic!("nothing named *{suffix} under {}", root.display());
}

fn refused_for_a_link<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    match result {
        Err(StoreError::Corrupt { detail, .. }) => {
            assert!(detail.contains("symbolic link"), "{detail}");
        }
        other => panic!("a write through a link must be refused: {other:?}"),
    }
}

#[tokio::test]
async fn writes_through_planted_links_are_refused_and_nothing_lands_outside() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let store = FileStore::open(&root).unwrap();
    let key = SessionKey::new("mia", "chat").unwrap();
    let v1 = store
        .append(&key, 0, &turn_events(1, "hi", None))
        .await
        .unwrap();
    store.settle_files().await.unwrap();

    // The session's folder swapped for a link to a folder outside the store while the store
    // runs and remembers the session: the next append is durable in the journal, but writing
    // it behind to the session's files is refused, and the store takes no more writes.
    let session_dir = find(&root, key.session_id());
    let moved = dir.path().join("moved");
    std::fs::rename(&session_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&outside, &session_dir).unwrap();
    let v2 = store
        .append(&key, v1, &turn_events(3, "again", None))
        .await
        .expect("durable in the journal");
    refused_for_a_link(store.settle_files().await);
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing lands outside"
    );
    assert!(std::fs::symlink_metadata(&session_dir)
        .unwrap()
        .file_type()
        .is_symlink());
    let later = store.append(&key, v2, &turn_events(5, "more", None)).await;
    assert!(
        matches!(later, Err(StoreError::Unavailable { .. })),
        "the store stops taking writes: {later:?}"
    );
    drop(store);
    // Reopened with the link still there, the journal's replay refuses it too.
    refused_for_a_link(FileStore::open(&root));
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // With the folder back, the replay writes the acknowledged append.
    std::fs::remove_file(&session_dir).unwrap();
    std::fs::rename(&moved, &session_dir).unwrap();
    let store = FileStore::open(&root).unwrap();
    let loaded = store.load(&key, 10).await.unwrap();
    assert_eq!(loaded.record.unwrap().version, v2);
    assert_eq!(loaded.events.len(), 4);
    drop(store);

    // The log itself swapped for a link to a file outside, for a session the store does not
    // remember (just opened): the append reads the session's files first and is refused.
    let log = std::fs::read_dir(&session_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a session has a log");
    let target = outside.join("log.jsonl");
    std::fs::copy(&log, &target).unwrap();
    let before = std::fs::read(&target).unwrap();
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&target, &log).unwrap();
    let store = FileStore::open(&root).unwrap();
    refused_for_a_link(store.append(&key, v2, &turn_events(5, "again", None)).await);
    assert_eq!(
        std::fs::read(&target).unwrap(),
        before,
        "the link's target is untouched"
    );

    // The app-state file as a link: a turn writing `app:` state is refused.
    let other = SessionKey::new("mia", "other").unwrap();
    let app_target = outside.join("app.json");
    std::fs::write(&app_target, b"{}").unwrap();
    std::os::unix::fs::symlink(&app_target, root.join("app.json")).unwrap();
    let delta = [("app:motd".to_owned(), json!("hello"))]
        .into_iter()
        .collect();
    let result = store
        .append(&other, 0, &turn_events(1, "hi", Some(delta)))
        .await;
    refused_for_a_link(result);
    assert_eq!(std::fs::read(&app_target).unwrap(), b"{}");
}

/// A new session whose path runs through a planted link (here its user's folder) is refused at
/// its first append, before anything is journaled, even when a load just found it absent (and
/// the store would otherwise remember that and not look at its files again); the store keeps
/// taking other sessions' writes.
#[tokio::test]
async fn a_new_session_under_a_planted_link_is_refused_before_anything_is_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let moved = dir.path().join("moved");
    let store = FileStore::open(&root).unwrap();
    let chat = SessionKey::new("mia", "chat").unwrap();
    store
        .append(&chat, 0, &turn_events(1, "hi", None))
        .await
        .unwrap();
    store.settle_files().await.unwrap();
    // mia's folder moved outside the store, a link left in its place.
    let sessions = find(&root, chat.session_id()).parent().unwrap().to_owned();
    let user_dir = sessions.parent().unwrap().to_owned();
    std::fs::rename(&user_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &user_dir).unwrap();

    let new = SessionKey::new("mia", "new").unwrap();
    let loaded = store.load(&new, 10).await.unwrap();
    assert!(loaded.record.is_none());
    refused_for_a_link(store.append(&new, 0, &turn_events(1, "hi", None)).await);
    let outside: Vec<_> = std::fs::read_dir(moved.join(sessions.file_name().unwrap()))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "only the old session is there: {outside:?}"
    );
    // Nothing was journaled for it, so the store did not stop.
    let ana = SessionKey::new("ana", "chat").unwrap();
    store
        .append(&ana, 0, &turn_events(1, "hi", None))
        .await
        .expect("other sessions' writes go on");
    store
        .settle_files()
        .await
        .expect("nothing owed through the link");
}
