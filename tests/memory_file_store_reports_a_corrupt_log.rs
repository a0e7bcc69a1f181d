//! The file memory store reports a corrupt log as `Corrupt` — never as an empty memory — and
//! leaves it in place; an append cut short by a crash (a last line without its newline) is cut
//! off and the entries before it are kept. Hostile user ids stay under the folder. A folder is
//! open in one store at a time: each test lets go of it before opening it again.

use std::sync::Arc;

use turnstile::backend::FileMemory;
use turnstile::memory::conformance::entry;
use turnstile::memory::MemoryStore;
use turnstile::MemoryError;

fn open(dir: &std::path::Path) -> Arc<dyn MemoryStore> {
    Arc::new(FileMemory::open(dir).expect("open"))
}

#[tokio::test]
async fn a_corrupt_line_is_reported_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path());
    let entries = [
        entry("nia", "s", 1, "first fact"),
        entry("nia", "s", 2, "second fact"),
    ];
    memory.ingest(&entries).await.unwrap();
    drop(memory);
    let path = FileMemory::open(dir.path()).unwrap().path_of("nia");
    let text = std::fs::read_to_string(&path).unwrap();
    let broken = text.replacen("\"op\"", "\"op", 1);
    std::fs::write(&path, &broken).unwrap();

    let reopened = open(dir.path());
    for _ in 0..2 {
        let err = reopened.search("nia", "fact", 5).await.unwrap_err();
        assert!(matches!(err, MemoryError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }
    let err = reopened
        .ingest(&[entry("nia", "s", 3, "third")])
        .await
        .unwrap_err();
    assert!(matches!(err, MemoryError::Corrupt { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        broken,
        "left as it was"
    );
    // Deleting the user is how its unreadable memory goes.
    reopened.delete_user("nia").await.unwrap();
    assert!(reopened.search("nia", "fact", 5).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_torn_last_line_is_cut_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path());
    memory
        .ingest(&[entry("oz", "s", 1, "kept fact")])
        .await
        .unwrap();
    drop(memory);
    let path = FileMemory::open(dir.path()).unwrap().path_of("oz");
    let whole = std::fs::read(&path).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(b"{\"op\":\"add\",\"entry\":{\"ke");
    std::fs::write(&path, &torn).unwrap();

    let reopened = open(dir.path());
    let hits = reopened.search("oz", "fact", 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        whole,
        "the torn append was cut off"
    );
    reopened
        .ingest(&[entry("oz", "s", 2, "new fact")])
        .await
        .unwrap();
    drop(reopened);
    assert_eq!(
        open(dir.path())
            .search("oz", "fact", 5)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn a_line_of_another_user_is_corrupt_and_hostile_ids_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileMemory::open(dir.path().join("mem")).unwrap();
    let memory: Arc<dyn MemoryStore> = Arc::new(files.clone());
    for user in ["../../etc/passwd", "a/b", "..", "x\\y"] {
        memory
            .ingest(&[entry(user, "s", 1, "hostile words")])
            .await
            .unwrap();
        let path = files.path_of(user);
        assert_eq!(
            path.parent(),
            Some(files.root()),
            "{user} escaped: {path:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing beside the folder"
    );
    // A log copied over another user's is not read as theirs.
    std::fs::copy(files.path_of("a/b"), files.path_of("victim")).unwrap();
    drop((memory, files));
    let err = open(&dir.path().join("mem"))
        .search("victim", "words", 5)
        .await
        .unwrap_err();
    assert!(matches!(err, MemoryError::Corrupt { .. }), "{err}");
}
