//! Property: a runtime with ownership on the Redis store activates a session with one script
//! that takes its lease and reads it (`claim.lua`), and its actor then loads nothing; a store
//! wrapper still sees every activation through its own `load`; and a session that cannot be
//! read once its lease is granted still goes through the path for unloadable sessions: a
//! delete removes it and the lease is given back.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::{eventually_ok, key, within};
use support::redis_server::{fresh_prefix, RedisServer};
use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::config::Ownership;
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, FaultyStore};
use turnstile::{EchoAgent, Runtime, Store};

const SESSIONS: u64 = 40;

/// A lease long enough that no renewal (a script of its own) falls inside a count.
fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent_arc(Arc::new(EchoAgent))
        .store_arc(store)
        .with_ownership(Ownership::new("http://a").with_lease_ttl(Duration::from_secs(60)))
        .build()
        .expect("runtime")
}

/// Scripts run by `SESSIONS` activations of fresh sessions, one turn each, through `store`.
async fn scripts_per_activation(server: &RedisServer, store: Arc<dyn Store>, tag: &str) -> u64 {
    let runtime = runtime(store);
    // Every script loaded once, so that no NOSCRIPT retry is counted below.
    within(runtime.call(&key(tag, "warm-up"), "hi"))
        .await
        .expect("warm-up turn");
    server.reset_stats().await;
    for s in 0..SESSIONS {
        let outcome = within(runtime.call(&key(tag, &format!("s{s}")), "hi"))
            .await
            .expect("turn");
        assert_eq!(outcome.seq, 2);
    }
    let scripts = server.scripts_run().await;
    within(runtime.shutdown()).await;
    scripts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activation_is_one_script_and_a_wrapper_still_sees_every_load() {
    // A server of its own: the test counts every script the server runs.
    let server = RedisServer::start_private();
    let options = RedisOptions::default().with_prefix(fresh_prefix());
    let store = Arc::new(
        RedisStore::connect(server.url(), options)
            .await
            .expect("connect"),
    );

    // A claim that reads the session (and an append): no load script of its own.
    let bare = scripts_per_activation(&server, store.clone(), "bare").await;
    assert_eq!(
        bare,
        2 * SESSIONS,
        "claim + append per session, no load script"
    );

    // Through a wrapper, the claim reads nothing and the actor loads through the wrapper.
    let wrapped = scripts_per_activation(&server, FaultyStore::new(store), "wrapped").await;
    assert_eq!(wrapped, 3 * SESSIONS, "claim + load + append per session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_reads_what_a_load_reads() {
    let server = RedisServer::start();
    let options = RedisOptions::default().with_prefix(fresh_prefix());
    let store = RedisStore::connect(server.url(), options)
        .await
        .expect("connect");
    let k = key("claims", "read");
    let mut version = 0;
    for turn in 0..3 {
        version = store
            .append(
                &k,
                version,
                &turn_events(turn * 2 + 1, &format!("t{turn}"), None),
            )
            .await
            .expect("append");
    }
    let expected = store.load(&k, 4).await.expect("load");
    let leases = store.leases().expect("the Redis store keeps leases");
    match leases
        .acquire_and_load(&k, &Claimant::new("http://a"), Duration::from_secs(10), 4)
        .await
        .expect("claim")
    {
        (Claim::Granted(_), Some(loaded)) => assert_eq!(loaded, expected),
        other => panic!("a free session is granted and read with its claim: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_unreadable_after_its_grant_is_still_deleted_and_its_lease_given_back() {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let options = RedisOptions::default().with_prefix(prefix.clone());
    let store = Arc::new(
        RedisStore::connect(server.url(), options)
            .await
            .expect("connect"),
    );
    let k = key("claims", "corrupt");
    store
        .append(&k, 0, &turn_events(1, "m0", None))
        .await
        .expect("append");
    // Corrupt the head's checkpoint.
    let mut conn = server.connection().await;
    let head = server.only_session_head(&prefix).await;
    let _: i64 = redis::cmd("HSET")
        .arg(&head)
        .arg("r")
        .arg("{not json")
        .query_async(&mut conn)
        .await
        .expect("HSET");

    let runtime = runtime(store.clone());
    assert!(
        within(runtime.call(&k, "hi")).await.is_err(),
        "a corrupt session is not served"
    );
    assert!(
        within(runtime.delete(&k)).await.expect("delete"),
        "the corrupt session is deleted"
    );
    // Given back right after the delete is answered.
    let leases = store.leases().expect("leases");
    eventually_ok(
        "the lease taken for the failed activation given back",
        Duration::from_millis(5),
        || {
            let leases = leases.clone();
            let k = k.clone();
            async move {
                match leases.owner(&k).await.expect("owner") {
                    None => Ok(()),
                    Some(owner) => Err(owner),
                }
            }
        },
    )
    .await;
    within(runtime.shutdown()).await;
}
