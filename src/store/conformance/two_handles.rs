//! Checks through two handles on one store: a stale write must reach the store's own atomic
//! compare-and-set (see [`super::run_two_handles`]).

use std::sync::Arc;

use super::{fill, key, turn_events};
use crate::store::{Store, StoreError};

/// A handle that last saw version 1 writes after another handle wrote version 2: the write
/// passes whatever the first handle checks on its own (it knows version 1 as current) and must be
/// refused by the store's atomic compare-and-set, leaving no trace.
pub async fn a_write_based_on_a_version_another_handle_replaced_is_refused(
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
) {
    let k = key("two-handles", "stale");
    let v1 = fill(a.as_ref(), &k, 1).await;
    let seen = b
        .load(&k, 10)
        .await
        .expect("load through the second handle");
    assert_eq!(seen.record.expect("head").version, v1);
    let v2 = a
        .append(&k, v1, &turn_events(3, "from a", None))
        .await
        .expect("append through the first handle");
    let stale = b.append(&k, v1, &turn_events(3, "from b", None)).await;
    match stale {
        Err(StoreError::Conflict {
            expected, found, ..
        }) => assert_eq!((expected, found), (v1, v2)),
        other => panic!("a write based on a replaced version must be a Conflict, got {other:?}"),
    }
    for store in [&a, &b] {
        let loaded = store.load(&k, 10).await.expect("load");
        assert_eq!(loaded.record.expect("head").version, v2);
        let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
        assert_eq!(
            texts,
            ["m0", "re: m0", "from a", "re: from a"],
            "no trace of b"
        );
    }
    let fresh = b.load(&k, 10).await.expect("reload").record.expect("head");
    b.append(&k, fresh.version, &turn_events(5, "after reload", None))
        .await
        .expect("after a reload the write goes through");
}

/// Writers on two handles that all start from one version: exactly one wins, whichever handle
/// it wrote through.
pub async fn racing_writers_on_two_handles_let_exactly_one_win(
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
) {
    let k = key("two-handles", "race");
    let v1 = fill(a.as_ref(), &k, 1).await;
    b.load(&k, 10)
        .await
        .expect("the second handle sees version 1");
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            let k = k.clone();
            tokio::spawn(async move {
                let events = turn_events(3, &format!("writer {i}"), None);
                store.append(&k, v1, &events).await
            })
        })
        .collect();
    let mut wins = 0;
    for writer in writers {
        match writer.await.expect("writer task") {
            Ok(_) => wins += 1,
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("a losing writer must see a Conflict, got {other:?}"),
        }
    }
    assert_eq!(wins, 1, "exactly one writer wins");
    let loaded = a.load(&k, 100).await.expect("load");
    assert_eq!(loaded.events.len(), 4, "the winner's events, once");
}
