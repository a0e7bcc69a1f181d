//! Checks of shared state: `user:` and `app:` keys kept once, and `null` deleting a key.

use std::sync::Arc;

use serde_json::json;

use super::{key, turn_events};
use crate::state::StateDelta;
use crate::store::Store;

/// `user:` state is shared by a user's sessions, `app:` by all, and neither leaks across users.
pub async fn shared_state_is_kept_once_per_user_and_app(store: Arc<dyn Store>) {
    let a1 = key("dave", "one");
    let delta: StateDelta = [
        ("user:name".to_owned(), json!("Dave")),
        ("app:motd".to_owned(), json!("hi")),
        ("temp:x".to_owned(), json!(1)),
    ]
    .into();
    store
        .append(&a1, 0, &turn_events(1, "x", Some(delta)))
        .await
        .expect("append");
    let a2 = store.load(&key("dave", "two"), 5).await.expect("load");
    assert_eq!(a2.user_state["name"], json!("Dave"));
    assert_eq!(a2.app_state["motd"], json!("hi"));
    let other = store.load(&key("erin", "one"), 5).await.expect("load");
    assert!(other.user_state.is_empty(), "user state never leaks");
    assert_eq!(other.app_state["motd"], json!("hi"));
    let head = store
        .load(&a1, 5)
        .await
        .expect("load")
        .record
        .expect("head");
    assert!(
        head.state.is_empty(),
        "shared and temp keys are not session state"
    );
}

/// A `null` in a delta removes a shared key.
pub async fn null_deletes_shared_keys(store: Arc<dyn Store>) {
    let k = key("nully", "s");
    let set: StateDelta = [
        ("user:a".to_owned(), json!(1)),
        ("user:b".to_owned(), json!(2)),
        ("app:nully".to_owned(), json!(3)),
    ]
    .into();
    let unset: StateDelta = [
        ("user:a".to_owned(), serde_json::Value::Null),
        ("app:nully".to_owned(), serde_json::Value::Null),
    ]
    .into();
    let v1 = store
        .append(&k, 0, &turn_events(1, "set", Some(set)))
        .await
        .expect("append");
    store
        .append(&k, v1, &turn_events(3, "unset", Some(unset)))
        .await
        .expect("append");
    let loaded = store.load(&k, 0).await.expect("load");
    assert_eq!(loaded.user_state.get("a"), None);
    assert_eq!(loaded.user_state.get("b"), Some(&json!(2)));
    assert_eq!(loaded.app_state.get("nully"), None);
}
