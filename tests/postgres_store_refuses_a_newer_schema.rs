//! Property: a database a newer turnstile migrated past this build's layout is refused on
//! connect with a clear error, and changed in nothing; a session head written with a newer
//! `schema_version` is refused on load (`Schema`), never read as empty or overwritten.
#![cfg(feature = "postgres")]

mod support;

use turnstile::backend::{PostgresOptions, POSTGRES_LAYOUT_VERSION};
use turnstile::store::conformance::turn_events;
use turnstile::{PostgresStore, SessionKey, Store, StoreError};

use support::postgres::TestDatabase;

#[tokio::test]
async fn a_schema_migrated_by_a_newer_build_is_refused_and_left_alone() {
    let database = TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("newer");
    database.store_with(options.clone()).await;
    let admin = database.admin().await;
    let newer = i32::try_from(POSTGRES_LAYOUT_VERSION).expect("small") + 1;
    admin
        .execute(
            "INSERT INTO newer.schema_migrations (version) VALUES ($1)",
            &[&newer],
        )
        .await
        .expect("record a newer migration");
    let before: i64 = admin
        .query_one("SELECT count(*) FROM newer.schema_migrations", &[])
        .await
        .expect("count")
        .get(0);
    let refused = PostgresStore::connect(database.url(), options.clone()).await;
    match refused {
        Err(
            ref e @ StoreError::NewerLayout {
                found, supported, ..
            },
        ) => {
            assert_eq!((found, supported), (newer as u32, POSTGRES_LAYOUT_VERSION));
            assert!(e.to_string().contains("upgrade turnstile"), "{e}");
        }
        other => panic!("a newer layout must be refused, got {other:?}"),
    }
    let after: i64 = admin
        .query_one("SELECT count(*) FROM newer.schema_migrations", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(before, after, "nothing was migrated");
    // The pairing store on the same schema is refused the same way.
    let pairings = turnstile::channel::PostgresPairingStore::connect(database.url(), options).await;
    assert!(
        matches!(
            pairings,
            Err(turnstile::channel::PairingError::Schema { found, .. }) if found == newer as u32
        ),
        "{pairings:?}"
    );
}

#[tokio::test]
async fn a_head_with_a_newer_schema_version_is_refused_not_overwritten() {
    let database = TestDatabase::create().await;
    let store = database
        .store_with(PostgresOptions::default().with_schema("heads"))
        .await;
    let key = SessionKey::new("u", "s").expect("key");
    let v1 = store
        .append(&key, 0, &turn_events(1, "hi", None))
        .await
        .expect("append");
    let admin = database.admin().await;
    admin
        .execute(
            "UPDATE heads.heads SET record = \
             jsonb_set(record::jsonb, '{schema_version}', '99')::text",
            &[],
        )
        .await
        .expect("plant a newer head");
    let fresh = database
        .store_with(PostgresOptions::default().with_schema("heads"))
        .await;
    let loaded = fresh.load(&key, 5).await;
    assert!(
        matches!(loaded, Err(StoreError::Schema { .. })),
        "{loaded:?}"
    );
    let write = fresh.append(&key, v1, &turn_events(3, "over?", None)).await;
    assert!(write.is_err(), "{write:?}");
    let record: String = admin
        .query_one("SELECT record FROM heads.heads", &[])
        .await
        .expect("read")
        .get(0);
    assert!(record.contains("\"schema_version\": 99"), "{record}");
}

#[tokio::test]
async fn a_schema_an_older_build_laid_out_is_migrated_and_keeps_its_sessions() {
    // Property: migrations are versioned: a schema at layout 2 (before the pairings table)
    // is brought to the current layout on connect, running only what it lacks, and its
    // sessions are kept.
    use turnstile::channel::{PairingStore, PostgresPairingStore};
    let database = TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("older");
    let store = database.store_with(options.clone()).await;
    let key = SessionKey::new("u", "s").expect("key");
    store
        .append(&key, 0, &turn_events(1, "kept", None))
        .await
        .expect("append");
    let admin = database.admin().await;
    // What layout 2 looked like: no pairings table, two migrations recorded.
    admin
        .batch_execute(
            "DROP TABLE older.pairings; DELETE FROM older.schema_migrations WHERE version > 2",
        )
        .await
        .expect("roll the schema back to layout 2");
    let migrated = database.store_with(options.clone()).await;
    let versions: Vec<i32> = admin
        .query(
            "SELECT version FROM older.schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("read the migrations")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let expected: Vec<i32> = (1..=i32::try_from(POSTGRES_LAYOUT_VERSION).expect("small")).collect();
    assert_eq!(versions, expected);
    assert_eq!(
        migrated.load(&key, 5).await.expect("load").events[0].text(),
        Some("kept")
    );
    let pairings = PostgresPairingStore::new(&migrated);
    pairings
        .put("slack", "U1", "u")
        .await
        .expect("the new table works");
    assert_eq!(
        pairings.get("slack", "U1").await.unwrap().as_deref(),
        Some("u")
    );
}
