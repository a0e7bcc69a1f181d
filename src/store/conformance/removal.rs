//! Checks of removal: one session, one user's sessions and shared state, and `gc`'s limits.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{fill, key, turn_events};
use crate::state::StateDelta;
use crate::store::{GcPolicy, Store};

/// `delete` removes exactly one session.
pub async fn delete_removes_one_session(store: Arc<dyn Store>) {
    let (gone, kept) = (key("heidi", "gone"), key("heidi", "kept"));
    fill(store.as_ref(), &gone, 1).await;
    fill(store.as_ref(), &kept, 1).await;
    assert!(store.delete(&gone).await.expect("delete"));
    assert!(!store.delete(&gone).await.expect("delete again"));
    assert!(store.load(&gone, 5).await.expect("load").record.is_none());
    assert!(store.load(&kept, 5).await.expect("load").record.is_some());
    fill(store.as_ref(), &gone, 1).await;
}

/// `delete_user` removes that user's sessions and shared state, nobody else's.
pub async fn delete_user_touches_no_other_user(store: Arc<dyn Store>) {
    let delta: StateDelta = [("user:k".to_owned(), json!(1))].into();
    for user in ["ivan", "ivana", "judy"] {
        store
            .append(
                &key(user, "s"),
                0,
                &turn_events(1, "x", Some(delta.clone())),
            )
            .await
            .expect("append");
        fill(store.as_ref(), &key(user, "t"), 1).await;
    }
    assert_eq!(store.delete_user("ivan").await.expect("delete_user"), 2);
    let gone = store.load(&key("ivan", "s"), 5).await.expect("load");
    assert!(gone.record.is_none());
    assert!(gone.user_state.is_empty());
    for other in ["ivana", "judy"] {
        let kept = store.load(&key(other, "s"), 5).await.expect("load");
        assert!(kept.record.is_some(), "{other}'s session survives");
        assert_eq!(
            kept.user_state["k"],
            json!(1),
            "{other}'s user state survives"
        );
    }
}

/// `gc` removes sessions past the age limit, then the least recently updated past the count.
pub async fn gc_removes_old_and_excess_sessions(store: Arc<dyn Store>) {
    for (i, s) in ["old", "mid", "new"].into_iter().enumerate() {
        let seq_base = 1 + 10_000 * i as u64;
        let mut events = turn_events(1, s, None);
        for e in &mut events {
            e.at_ms = seq_base + e.seq;
        }
        store
            .append(&key("kim", s), 0, &events)
            .await
            .expect("append");
    }
    let report = store
        .gc(
            &GcPolicy {
                max_sessions: Some(1),
                max_age: Some(Duration::from_millis(25_000)),
            },
            30_000,
        )
        .await
        .expect("gc");
    let mut removed: Vec<_> = report
        .removed
        .iter()
        .map(|k| k.session_id().to_owned())
        .collect();
    removed.sort();
    assert_eq!(removed, ["mid", "old"]);
    assert!(store
        .load(&key("kim", "new"), 1)
        .await
        .expect("load")
        .record
        .is_some());
    assert!(store
        .load(&key("kim", "old"), 1)
        .await
        .expect("load")
        .record
        .is_none());
}
