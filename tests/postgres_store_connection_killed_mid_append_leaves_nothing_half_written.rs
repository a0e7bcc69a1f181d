//! Property: an append whose connection is killed (`pg_terminate_backend`) while its transaction
//! is open leaves nothing behind — no head change, no event, no shared-state change — answers
//! `Unavailable`, and the store's pool serves the next append on a fresh connection.
#![cfg(feature = "postgres")]

mod support;

use serde_json::json;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

use support::harness::within;
use support::postgres::{blocked_backend, TestDatabase};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_append_writes_nothing_and_the_pool_recovers() {
    let database = TestDatabase::create().await;
    let store = database.store().await;
    let key = SessionKey::new("victim", "s").expect("key");
    let v1 = store
        .append(&key, 0, &turn_events(1, "kept", None))
        .await
        .expect("first append");

    // Hold the application's state row so that the next append, which changes `app:` state,
    // stops inside its transaction after taking its head.
    let mut admin = database.admin().await;
    let holder = admin.transaction().await.expect("begin");
    let schema = store_schema(&holder).await;
    holder
        .execute(&format!("SELECT 1 FROM {schema}.app_state FOR UPDATE"), &[])
        .await
        .expect("lock the app state row");

    let delta: StateDelta = [
        ("user:k".to_owned(), json!("half")),
        ("app:k".to_owned(), json!("half")),
        ("topic".to_owned(), json!("half")),
    ]
    .into();
    let append = {
        let (store, key) = (store.clone(), key.clone());
        tokio::spawn(async move {
            store
                .append(&key, v1, &turn_events(3, "lost", Some(delta)))
                .await
        })
    };
    let observer = database.admin().await;
    let pid = blocked_backend(&observer, database.name()).await;
    let killed: bool = observer
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .expect("terminate")
        .get(0);
    assert!(killed);
    let result = within(append).await.expect("append task");
    assert!(
        matches!(
            result,
            Err(StoreError::Unavailable {
                backend: "postgres",
                ..
            })
        ),
        "{result:?}"
    );
    holder.rollback().await.expect("release the row");

    let loaded = store.load(&key, 10).await.expect("load after the kill");
    let head = loaded.record.expect("head");
    assert_eq!(head.version, v1, "the head is as before");
    assert!(
        head.state.is_empty(),
        "no session state from the killed turn"
    );
    assert_eq!(loaded.events.len(), 2, "no event from the killed turn");
    assert!(
        loaded.user_state.is_empty(),
        "no user state from the killed turn"
    );
    assert!(
        loaded.app_state.is_empty(),
        "no app state from the killed turn"
    );

    let v2 = store
        .append(&key, v1, &turn_events(3, "after", None))
        .await
        .expect("the pool serves the next append");
    assert_eq!(v2, v1 + 1);
}

/// The schema of the store's tables (the only one besides the system's).
async fn store_schema(client: &tokio_postgres::Transaction<'_>) -> String {
    client
        .query_one(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%'",
            &[],
        )
        .await
        .expect("the store's schema")
        .get(0)
}
