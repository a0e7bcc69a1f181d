//! Property: `turnstile sessions import` refuses a document written by a newer turnstile (or a
//! malformed one) with a clear error, leaves the document untouched and writes nothing at all to
//! the store.

mod support;

use serde_json::json;
use support::cli::turnstile;
use support::stores::walk;
use turnstile::state::{SessionRecord, SCHEMA_VERSION};
use turnstile::store::conformance::turn_events;
use turnstile::store::FileStore;
use turnstile::{SessionKey, Store};

fn document(key: &SessionKey) -> serde_json::Value {
    let events = turn_events(1, "hello", None);
    let mut record = SessionRecord::new(key.clone(), 1);
    for event in &events {
        record.apply(event);
    }
    json!({ "schema_version": SCHEMA_VERSION, "key": key, "record": record, "events": events })
}

#[tokio::test]
async fn a_newer_or_broken_document_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    drop(FileStore::open(&root).expect("create the store"));
    let before = {
        let mut files = walk(&root);
        files.sort();
        files
    };
    let key = SessionKey::new("bob", "s1").expect("key");
    let store_arg = format!("file:{}", root.display());

    let mut newer = document(&key);
    newer["schema_version"] = json!(SCHEMA_VERSION + 1);
    newer["record"]["schema_version"] = json!(SCHEMA_VERSION + 1);
    let mut gap = document(&key);
    gap["events"][1]["seq"] = json!(7);
    let cases = [
        (
            "newer",
            serde_json::to_vec_pretty(&newer).expect("encode"),
            "upgrade turnstile",
        ),
        (
            "gap",
            serde_json::to_vec_pretty(&gap).expect("encode"),
            "without gaps",
        ),
        (
            "broken",
            b"{\"schema_version\": 1, \"key\":".to_vec(),
            "not valid JSON",
        ),
    ];
    for (name, bytes, reason) in cases {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, &bytes).expect("write the document");
        let run = turnstile(&[
            "sessions",
            "--store",
            &store_arg,
            "import",
            &path.to_string_lossy(),
        ]);
        assert!(!run.success, "{name}: must be refused");
        assert!(run.stderr.contains(reason), "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains("nothing was written"),
            "{name}: {}",
            run.stderr
        );
        assert_eq!(
            std::fs::read(&path).expect("reread"),
            bytes,
            "{name}: document changed"
        );
    }

    let mut after = walk(&root);
    after.sort();
    assert_eq!(
        after, before,
        "the store's files must be exactly as they were"
    );
    let store = FileStore::open(&root).expect("reopen");
    assert!(store.load(&key, 0).await.expect("load").record.is_none());
}
