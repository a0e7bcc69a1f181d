//! Property: ids are data, never SQL — a session or user id written as an injection
//! (`'; DROP TABLE …`) is stored, loaded, listed and deleted as an opaque name, and every table
//! and every other user's session is still there afterwards.
#![cfg(feature = "postgres")]

mod support;

use serde_json::json;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::store::PageRequest;
use turnstile::{SessionKey, Store};

use support::postgres::TestDatabase;

#[tokio::test]
async fn injection_shaped_ids_are_opaque_names() {
    let database = TestDatabase::create().await;
    let store = database.store().await;
    let victim = SessionKey::new("victim", "s").expect("key");
    store
        .append(&victim, 0, &turn_events(1, "keep me", None))
        .await
        .expect("victim appends");
    let user = "'; DROP TABLE heads; --";
    let hostile = [
        SessionKey::new(user, "x'); DROP TABLE events; --").expect("key"),
        SessionKey::new(user, "\" OR 1=1 --").expect("key"),
        SessionKey::new(user, "$1; DELETE FROM user_state").expect("key"),
        SessionKey::anonymous("'); TRUNCATE app_state; --").expect("key"),
    ];
    let delta: StateDelta = [
        ("user:'; DROP TABLE user_state; --".to_owned(), json!("v")),
        ("app:k".to_owned(), json!("'); DROP TABLE app_state; --")),
    ]
    .into();
    for key in &hostile {
        store
            .append(
                key,
                0,
                &turn_events(1, "'; DROP TABLE events; --", Some(delta.clone())),
            )
            .await
            .expect("append under a hostile id");
        let loaded = store.load(key, 5).await.expect("load under a hostile id");
        assert_eq!(loaded.record.expect("head").key, *key);
        assert_eq!(loaded.events[0].text(), Some("'; DROP TABLE events; --"));
    }
    let page = store
        .list(user, &PageRequest::default())
        .await
        .expect("list");
    assert_eq!(page.sessions.len(), 3);
    let loaded = store.load(&hostile[0], 5).await.expect("load");
    assert_eq!(
        loaded.user_state["'; DROP TABLE user_state; --"],
        json!("v")
    );
    assert_eq!(store.delete_user(user).await.expect("delete_user"), 3);
    assert!(store.delete(&hostile[3]).await.expect("delete"));

    let admin = database.admin().await;
    let tables: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_tables \
             WHERE tablename IN ('heads', 'events', 'user_state', 'app_state')",
            &[],
        )
        .await
        .expect("count tables")
        .get(0);
    assert_eq!(tables, 4, "every table is still there");
    let kept = store.load(&victim, 5).await.expect("load the victim");
    assert_eq!(kept.events.len(), 2, "the victim's session is untouched");
    assert_eq!(kept.app_state["k"], json!("'); DROP TABLE app_state; --"));
}
