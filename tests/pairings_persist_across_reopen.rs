//! Pairing stores: every implementation keeps the same contract (one user per account, a
//! user's pairings found and removed without touching others', hostile ids kept apart), and the
//! file, Redis and PostgreSQL stores keep pairings across a reopen.

mod support;

use support::stores::temp_file_store;
use turnstile::backend::FileStore;
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

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_pairing_store_keeps_the_contract_and_is_shared() {
    // Property: the PostgreSQL store keeps the contract, and a second store on the same
    // database and schema (another process, with its own pool) sees and changes the same
    // pairings; another schema is another namespace.
    use turnstile::backend::PostgresOptions;
    use turnstile::channel::PostgresPairingStore;
    let database = support::postgres::TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("pairs");
    let store = PostgresPairingStore::connect(database.url(), options.clone())
        .await
        .expect("connect");
    assert_eq!(store.name(), "postgres");
    conformance(&store).await;
    let other = PostgresPairingStore::connect(database.url(), options)
        .await
        .expect("a second pool");
    assert_eq!(
        other.get("web", "w:1").await.unwrap().as_deref(),
        Some("alice")
    );
    other.put("slack", "U7", "alice").await.unwrap();
    assert_eq!(
        store.of_user("alice").await.unwrap(),
        [
            Pairing {
                channel: "slack".into(),
                channel_user: "U7".into(),
                user: "alice".into()
            },
            Pairing {
                channel: "web".into(),
                channel_user: "w:1".into(),
                user: "alice".into()
            }
        ],
        "ordered by channel, then account"
    );
    assert_eq!(
        other.put("slack", "U7", "bob").await.unwrap().as_deref(),
        Some("alice"),
        "the other pool replaced the pairing the first one made"
    );
    assert_eq!(store.remove_user("bob").await.unwrap(), 1);
    assert_eq!(other.get("slack", "U7").await.unwrap(), None);

    let elsewhere = PostgresPairingStore::connect(
        database.url(),
        PostgresOptions::default().with_schema("elsewhere"),
    )
    .await
    .expect("another schema");
    assert_eq!(elsewhere.get("web", "w:1").await.unwrap(), None);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pairings_bind_hostile_ids_as_parameters() {
    // Property: ids are data, never SQL: injection-shaped channels, accounts and users are
    // stored, found and removed as opaque names, the table survives, other pairings are
    // untouched, and an id PostgreSQL cannot store (NUL) is refused clearly.
    use turnstile::backend::PostgresOptions;
    use turnstile::channel::PostgresPairingStore;
    let database = support::postgres::TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("hostile");
    let store = PostgresPairingStore::connect(database.url(), options.clone())
        .await
        .expect("connect");
    store.put("slack", "U1", "victim").await.unwrap();
    let user = "'; DROP TABLE hostile.pairings; --";
    let accounts = [
        ("x'); DELETE FROM hostile.pairings; --", "U2"),
        ("slack", "' OR '1'='1"),
        ("$1", "$2"),
        ("\\", "%_*"),
    ];
    for (channel, account) in accounts {
        assert_eq!(store.put(channel, account, user).await.unwrap(), None);
        assert_eq!(
            store.get(channel, account).await.unwrap().as_deref(),
            Some(user)
        );
    }
    assert_eq!(store.of_user(user).await.unwrap().len(), accounts.len());
    assert_eq!(store.of_user("%").await.unwrap(), [], "no pattern matching");
    assert_eq!(store.remove_user("' OR '1'='1").await.unwrap(), 0);
    assert_eq!(
        store.remove_user(user).await.unwrap(),
        accounts.len() as u64
    );
    assert_eq!(
        store.get("slack", "U1").await.unwrap().as_deref(),
        Some("victim"),
        "another user's pairing is untouched"
    );
    let err = store.put("slack", "U\0", "eve").await.unwrap_err();
    assert!(
        matches!(err, PairingError::InvalidRequest(ref m) if m.contains("NUL")),
        "{err}"
    );
    let tables: i64 = database
        .admin()
        .await
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'hostile' AND tablename = 'pairings'",
            &[],
        )
        .await
        .expect("count tables")
        .get(0);
    assert_eq!(tables, 1, "the table is still there");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pairing_store_opened_beside_a_postgres_store_is_postgres_and_shared() {
    // Property: what `turnstile serve --store postgres://…` opens (`open_store`, then
    // `open_pairings`) keeps pairings in the database, in the store's schema, so a second
    // opener (another process) sees them; never process memory.
    use turnstile::backend::{open_store, StoreUrl};
    use turnstile::channel::open_pairings;
    let database = support::postgres::TestDatabase::create().await;
    let joint = if database.url().contains('?') {
        '&'
    } else {
        '?'
    };
    let url = StoreUrl::Postgres(format!("{}{joint}schema=served", database.url()));
    let first = open_store(&url).await.expect("open the store");
    let pairings = open_pairings(&first).await.expect("open the pairings");
    assert_eq!(pairings.name(), "postgres");
    pairings.put("discord", "d-1", "dana").await.unwrap();
    let second = open_store(&url).await.expect("open the store again");
    let again = open_pairings(&second)
        .await
        .expect("open the pairings again");
    assert_eq!(
        again.get("discord", "d-1").await.unwrap().as_deref(),
        Some("dana")
    );
    let rows: i64 = database
        .admin()
        .await
        .query_one("SELECT count(*) FROM served.pairings", &[])
        .await
        .expect("read the table")
        .get(0);
    assert_eq!(rows, 1, "the pairing is in the store's schema");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_postgres_pairings_of_one_account_each_replace_exactly_one() {
    // Property: pairing is atomic across processes. Writers on two pools racing to pair one new
    // account form one order: exactly one found it unpaired, every other one reports the user
    // it replaced, and each user is replaced at most once — the final one never.
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use turnstile::backend::PostgresOptions;
    use turnstile::channel::PostgresPairingStore;
    let database = support::postgres::TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("race");
    let a = Arc::new(
        PostgresPairingStore::connect(database.url(), options.clone())
            .await
            .expect("connect"),
    );
    let b = Arc::new(
        PostgresPairingStore::connect(database.url(), options)
            .await
            .expect("a second pool"),
    );
    let writers: Vec<_> = (0..16)
        .map(|n| {
            let store = if n % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                store
                    .put("slack", "U-race", &format!("user{n}"))
                    .await
                    .expect("put")
            })
        })
        .collect();
    let mut previous = Vec::new();
    for writer in writers {
        previous.push(writer.await.expect("writer"));
    }
    assert_eq!(
        previous.iter().filter(|p| p.is_none()).count(),
        1,
        "{previous:?}"
    );
    let replaced: BTreeSet<String> = previous.iter().flatten().cloned().collect();
    assert_eq!(
        replaced.len(),
        15,
        "each user replaced at most once: {previous:?}"
    );
    let last = a.get("slack", "U-race").await.unwrap().expect("paired");
    assert!(
        !replaced.contains(&last),
        "the final user was never replaced"
    );
}
