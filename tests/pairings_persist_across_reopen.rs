//! Pairing stores: every implementation keeps the same contract (one user per account, a
//! user's pairings found and removed without touching others', hostile ids kept apart), and the
//! file and Redis stores keep pairings across a reopen.

mod support;

use support::stores::temp_file_store;
use turnstile::store::FileStore;
use turnstile::{
    channel::FilePairingStore, channel::MemoryPairingStore, channel::Pairing,
    channel::PairingError, channel::PairingStore, channel::PAIRINGS_FILE,
};

/// The contract every pairing store keeps.
async fn conformance(store: &dyn PairingStore) {
    assert_eq!(store.get("slack", "U1").await.unwrap(), None);
    assert_eq!(store.put("slack", "U1", "alice").await.unwrap(), None);
    assert_eq!(store.put("web", "w:1", "alice").await.unwrap(), None);
    assert_eq!(store.put("slack", "U2", "bob").await.unwrap(), None);
    assert_eq!(
        store.get("slack", "U1").await.unwrap().as_deref(),
        Some("alice")
    );

    // Re-pairing moves the account and says where it was.
    assert_eq!(
        store.put("slack", "U1", "carol").await.unwrap().as_deref(),
        Some("alice")
    );
    let alice = store.of_user("alice").await.unwrap();
    assert_eq!(
        alice,
        [Pairing {
            channel: "web".into(),
            channel_user: "w:1".into(),
            user: "alice".into()
        }]
    );
    assert_eq!(store.of_user("carol").await.unwrap().len(), 1);

    // Ids that look like separators or key syntax stay their own entries.
    store.put("a:b", "c", "x").await.unwrap();
    store.put("a", "b:c", "y").await.unwrap();
    assert_eq!(store.get("a:b", "c").await.unwrap().as_deref(), Some("x"));
    assert_eq!(store.get("a", "b:c").await.unwrap().as_deref(), Some("y"));

    assert_eq!(
        store.remove("slack", "U2").await.unwrap().as_deref(),
        Some("bob")
    );
    assert_eq!(store.remove("slack", "U2").await.unwrap(), None);
    assert_eq!(store.remove_user("carol").await.unwrap(), 1);
    assert_eq!(store.remove_user("carol").await.unwrap(), 0);
    assert_eq!(store.get("slack", "U1").await.unwrap(), None);
    assert_eq!(
        store.get("web", "w:1").await.unwrap().as_deref(),
        Some("alice"),
        "others kept"
    );
}

#[tokio::test]
async fn the_memory_pairing_store_keeps_the_contract() {
    // Property: see `conformance`.
    conformance(&MemoryPairingStore::new()).await;
}

#[tokio::test]
async fn the_file_pairing_store_keeps_the_contract_and_survives_a_reopen() {
    // Property: a pairing acknowledged by the file store is in the file (fsync'd, renamed into
    // place) and is read back by the next process that opens the root.
    let (dir, sessions) = temp_file_store();
    let store = FilePairingStore::open(&sessions).unwrap();
    assert_eq!(store.path(), dir.path().join(PAIRINGS_FILE));
    conformance(&store).await;
    store.put("discord", "d-1", "dana").await.unwrap();
    drop(store);
    drop(sessions);

    let reopened_sessions = FileStore::open(dir.path()).unwrap();
    let reopened = FilePairingStore::open(&reopened_sessions).unwrap();
    assert_eq!(
        reopened.get("discord", "d-1").await.unwrap().as_deref(),
        Some("dana")
    );
    assert_eq!(
        reopened.get("web", "w:1").await.unwrap().as_deref(),
        Some("alice")
    );
    assert_eq!(
        reopened.get("slack", "U1").await.unwrap(),
        None,
        "removals persisted too"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file is left behind");
}

#[tokio::test]
async fn a_corrupt_or_newer_pairings_file_is_refused_not_reset() {
    // Property: unreadable pairings are an error naming the file, and the file is left as it
    // was; a file from a newer schema is refused the same way.
    let (dir, sessions) = temp_file_store();
    let path = dir.path().join(PAIRINGS_FILE);
    std::fs::write(&path, b"{ not json").unwrap();
    let err = FilePairingStore::open(&sessions).unwrap_err();
    assert!(matches!(err, PairingError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(PAIRINGS_FILE), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");

    std::fs::write(&path, br#"{"schema_version": 99, "pairings": []}"#).unwrap();
    let err = FilePairingStore::open(&sessions).unwrap_err();
    assert!(
        matches!(err, PairingError::Schema { found: 99, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_fields_of_the_pairings_file_are_written_back() {
    // Property: a newer writer's top-level fields survive a change made by this version.
    let (dir, sessions) = temp_file_store();
    let path = dir.path().join(PAIRINGS_FILE);
    std::fs::write(
        &path,
        br#"{"schema_version": 1, "pairings": [], "owner": "ops"}"#,
    )
    .unwrap();
    let store = FilePairingStore::open(&sessions).unwrap();
    store.put("slack", "U1", "alice").await.unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(written["owner"], "ops");
    assert_eq!(written["pairings"][0]["user"], "alice");
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn the_redis_pairing_store_keeps_the_contract_and_is_shared() {
    // Property: the Redis store keeps the contract, and a second connection (another process)
    // sees the same pairings.
    use std::sync::Arc;
    use turnstile::channel::RedisPairingStore;
    let server = support::redis_server::RedisServer::start();
    let prefix = support::redis_server::fresh_prefix();
    let store = RedisPairingStore::connect(server.url(), &prefix)
        .await
        .unwrap();
    conformance(&store).await;
    let other: Arc<dyn PairingStore> = Arc::new(
        RedisPairingStore::connect(server.url(), &prefix)
            .await
            .unwrap(),
    );
    assert_eq!(
        other.get("web", "w:1").await.unwrap().as_deref(),
        Some("alice")
    );
    assert!(RedisPairingStore::connect(server.url(), "bad prefix")
        .await
        .is_err());
}
