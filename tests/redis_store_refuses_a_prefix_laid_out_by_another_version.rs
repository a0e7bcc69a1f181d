//! The Redis store's key layout is versioned (`P:layout`): a prefix marked by a newer turnstile
//! is refused with `NewerLayout`, and data of the older, unversioned layout (which this build no
//! longer reads) with a clear `InvalidRequest` — both before anything is read or written. A
//! fresh prefix is marked with this build's version. A prefix of layout 2 (whose data this
//! build reads as it is) is refused unless the operator says it may be taken over
//! (`upgrade_from=2`); then it is marked as layout 3, its sessions kept.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Leases};
use turnstile::{SessionKey, Store, StoreError};

use support::redis_server::{fresh_prefix, RedisServer};

#[tokio::test]
async fn newer_and_unversioned_layouts_are_refused_layout_2_is_taken_over_and_fresh_prefixes_are_marked(
) {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let connect = |prefix: &str| {
        RedisStore::connect(
            server.url(),
            RedisOptions::default().with_prefix(prefix.to_owned()),
        )
    };

    let fresh = fresh_prefix();
    connect(&fresh).await.expect("a fresh prefix");
    let mark: String = redis::cmd("GET")
        .arg(format!("{fresh}:layout"))
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(mark, "3");
    connect(&fresh).await.expect("its own layout again");

    let newer = fresh_prefix();
    let _: () = redis::cmd("SET")
        .arg(format!("{newer}:layout"))
        .arg(4)
        .query_async(&mut conn)
        .await
        .expect("SET");
    match connect(&newer).await {
        Err(StoreError::NewerLayout {
            found, supported, ..
        }) => assert_eq!((found, supported), (4, 3)),
        other => panic!("a newer layout must be refused, got {other:?}"),
    }

    // Layout 2: a session written by this build, then the mark set back as layout 2 left it.
    let two = fresh_prefix();
    let key = SessionKey::new("ann", "kept").expect("key");
    let store = connect(&two).await.expect("a fresh prefix");
    store
        .append(&key, 0, &turn_events(1, "before the upgrade", None))
        .await
        .expect("append");
    let _: () = redis::cmd("SET")
        .arg(format!("{two}:layout"))
        .arg(2)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let mark = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        let two = two.clone();
        async move {
            let mark: String = redis::cmd("GET")
                .arg(format!("{two}:layout"))
                .query_async(&mut conn)
                .await
                .expect("GET");
            mark
        }
    };
    // Not without the operator's word: a layout-2 build may still run there.
    match connect(&two).await {
        Err(StoreError::InvalidRequest(message)) => {
            assert!(message.contains("upgrade_from=2"), "{message}");
        }
        other => panic!("layout 2 must not be taken over unasked, got {other:?}"),
    }
    assert_eq!(mark(&mut conn).await, "2", "refused with nothing changed");
    let upgrade = |prefix: &str| {
        RedisStore::connect(
            server.url(),
            RedisOptions::default()
                .with_prefix(prefix.to_owned())
                .with_upgrade_from(2),
        )
    };
    let upgraded = upgrade(&two)
        .await
        .expect("layout 2 is taken over when asked");
    assert_eq!(mark(&mut conn).await, "3", "marked as this build's layout");
    let loaded = upgraded.load(&key, 10).await.expect("load");
    let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(texts, ["before the upgrade", "re: before the upgrade"]);
    // An owner goes on with the session, fenced.
    let lease = match upgraded
        .acquire(&key, &Claimant::new("http://a"), Duration::from_secs(60))
        .await
        .expect("acquire")
    {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    };
    upgraded
        .append_fenced(
            &key,
            loaded.record.expect("stored").version,
            &turn_events(3, "after", None),
            &lease,
        )
        .await
        .expect("a fenced append after the upgrade");
    // Asked again on a prefix that is layout 3 already: nothing to do.
    upgrade(&two).await.expect("the upgrade is done once");
    assert_eq!(mark(&mut conn).await, "3");
    // Another layout to take over is refused before connecting.
    match RedisStore::connect(
        &format!("{}/?upgrade_from=1", server.url().trim_end_matches('/')),
        RedisOptions::default().with_prefix(two.clone()),
    )
    .await
    {
        Err(StoreError::InvalidRequest(message)) => {
            assert!(message.contains("upgrade_from=1"), "{message}");
        }
        other => panic!("upgrade_from=1 must be refused, got {other:?}"),
    }

    let old = fresh_prefix();
    let _: i64 = redis::cmd("ZADD")
        .arg(format!("{old}:gc"))
        .arg(1)
        .arg("u61:73")
        .query_async(&mut conn)
        .await
        .expect("ZADD");
    match connect(&old).await {
        Err(StoreError::InvalidRequest(message)) => {
            assert!(message.contains("layout version 1"), "{message}");
        }
        other => panic!("unversioned data must be refused, got {other:?}"),
    }
    let marked: i64 = redis::cmd("EXISTS")
        .arg(format!("{old}:layout"))
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert_eq!(marked, 0, "the old prefix is left as it was");
}
