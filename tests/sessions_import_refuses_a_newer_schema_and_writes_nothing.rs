//! Property: `turnstile sessions import` refuses a document written by a newer turnstile (or a
//! malformed one) with a clear error, leaves the document untouched and writes nothing at all to
//! the store.

mod support;

use serde_json::json;
use support::cli::turnstile;
use support::stores::contents;
use turnstile::backend::FileStore;
use turnstile::state::{SessionRecord, SCHEMA_VERSION};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

fn document(key: &SessionKey) -> serde_json::Value {
    let events = turn_events(1, "hello", None);
    let mut record = SessionRecord::new(key.clone(), 1);
    for event in &events {
        record.apply(event);
    }
    json!({ "schema_version": SCHEMA_VERSION, "key": key, "record": record, "events": events })
}

/// The store's files and their contents, except the lock file: every process that opens the
/// root (the binary included) writes its own pid there, which is not a write to the data.
fn data(root: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Option<String>> {
    let mut files = contents(root);
    files.retain(|path, _| path.file_name().is_none_or(|n| n != "turnstile.lock"));
    files
}

#[tokio::test]
async fn a_newer_or_broken_document_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let key = SessionKey::new("bob", "s1").expect("key");
    {
        // Another session is in the store, so that there are data files to leave untouched.
        let store = FileStore::open(&root).expect("create the store");
        let other = SessionKey::new("bob", "s0").expect("key");
        store
            .append(&other, 0, &turn_events(1, "keep me", None))
            .await
            .expect("append");
    }
    let before = data(&root);
    assert!(before.values().any(Option::is_some), "{before:?}");
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

    assert_eq!(
        data(&root),
        before,
        "the store's files and their contents must be exactly as they were"
    );
    let store = FileStore::open(&root).expect("reopen");
    assert!(store.load(&key, 0).await.expect("load").record.is_none());
}
