//! Property: `turnstile sessions export` then `import` (after a delete) recreates the session
//! with exactly the same events and the same folded state and statistics, and `import` refuses
//! to overwrite a session that exists.

mod support;

use serde_json::json;
use support::cli::turnstile;
use turnstile::backend::FileStore;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

#[tokio::test]
async fn an_exported_session_imports_back_identical() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = SessionKey::new("alice", "support chat/1").expect("key");
    let original = {
        let store = FileStore::open(dir.path()).expect("open");
        let delta: StateDelta = [("topic".to_owned(), json!("parcel"))].into();
        let v = store
            .append(&key, 0, &turn_events(1, "where is my parcel?", Some(delta)))
            .await
            .expect("append");
        store
            .append(&key, v, &turn_events(3, "thanks", None))
            .await
            .expect("append");
        store.read_events(&key, 1, usize::MAX).await.expect("read")
    }; // The store is dropped: the binary needs the root's lock.
    let root = format!("file:{}", dir.path().display());
    let doc = dir.path().join("export.json");
    let key_arg = key.to_string();
    let doc_arg = doc.to_string_lossy().into_owned();

    let export = turnstile(&[
        "sessions", "--store", &root, "export", &key_arg, "-o", &doc_arg,
    ]);
    assert!(export.success, "{}", export.stderr);
    let document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&doc).expect("read the export")).expect("JSON");
    for field in ["schema_version", "key", "record", "events"] {
        assert!(document.get(field).is_some(), "no {field}");
    }

    let refused = turnstile(&["sessions", "--store", &root, "import", &doc_arg]);
    assert!(
        !refused.success,
        "an existing session must not be overwritten"
    );
    assert!(
        refused.stderr.contains("already exists"),
        "{}",
        refused.stderr
    );

    assert!(turnstile(&["sessions", "--store", &root, "delete", &key_arg]).success);
    let import = turnstile(&["sessions", "--store", &root, "import", &doc_arg]);
    assert!(import.success, "{}", import.stderr);

    let store = FileStore::open(dir.path()).expect("reopen");
    let events = store.read_events(&key, 1, usize::MAX).await.expect("read");
    assert_eq!(events, original, "the same events, ids and times included");
    let record = store
        .load(&key, 0)
        .await
        .expect("load")
        .record
        .expect("exists");
    assert_eq!(record.state, [("topic".to_owned(), json!("parcel"))].into());
    assert_eq!(record.stats.turns, 2);
    assert_eq!(record.next_seq, 5);
}
