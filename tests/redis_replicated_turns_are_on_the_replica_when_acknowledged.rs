//! Property: with `replicas=1`, a turn is acknowledged only once the replica holds it — many
//! concurrent turns over several sessions all succeed, each one is on the replica the moment
//! its call returns, and while the replica is stopped no turn is acknowledged at all, though
//! the primary holds them.
//!
//! Breakage caught (verified by hand): appends that skip `WAIT` (or send it on a connection
//! other than the append's) are acknowledged as soon as the primary commits, so the calls made
//! while the replica is stopped return at once. On one host a live replica usually keeps up
//! even without `WAIT`, so the first test alone would rarely see that; the second always does.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::{eventually_stored, key, stored_events, within};
use support::redis_replica::ReplicatedRedis;
use support::redis_server::fresh_prefix;
use turnstile::{EchoAgent, Runtime, SessionKey, Store};

/// Sessions driven at once, callers per session, and turns per caller.
const SESSIONS: usize = 12;
const CALLERS: usize = 2;
const TURNS: usize = 8;

/// How long an append waits for the replica: longer than the replica is ever stopped here.
const QUERY: &str = "replicas=1&replica_timeout_ms=8000";

/// Checks that the replica holds the event `seq` of `key`, with `text`.
async fn on_replica(replica: &dyn Store, key: &SessionKey, seq: u64, text: &str) {
    let events = replica
        .read_events(key, seq, 1)
        .await
        .expect("read the replica");
    let event = events.first().unwrap_or_else(|| {
        panic!("{key}: turn answered at seq {seq} is acknowledged but not on the replica")
    });
    assert_eq!((event.seq, event.text()), (seq, Some(text)), "{key}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_turn_is_already_on_the_replica() {
    let redis = ReplicatedRedis::start();
    let prefix = fresh_prefix();
    let store = redis.store(&prefix, QUERY).await.expect("connect");
    let replica: Arc<dyn Store> = Arc::new(redis.replica_reader(&prefix).await);
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(store)
        .build()
        .unwrap();
    let mut callers = Vec::new();
    for s in 0..SESSIONS {
        for c in 0..CALLERS {
            let (rt, replica, k) = (rt.clone(), replica.clone(), key("u", &format!("s{s}")));
            callers.push(tokio::spawn(async move {
                for t in 0..TURNS {
                    let input = format!("c{c} t{t}");
                    let outcome = rt.call(&k, input.clone()).await.expect("acknowledged");
                    // Read at once: WAIT returned, so the replica must already have it.
                    on_replica(replica.as_ref(), &k, outcome.seq, &input).await;
                }
            }));
        }
    }
    for caller in callers {
        within(caller).await.expect("caller");
    }
    for s in 0..SESSIONS {
        let k = key("u", &format!("s{s}"));
        let events = stored_events(replica.as_ref(), &k).await;
        assert_eq!(
            events.len(),
            2 * CALLERS * TURNS,
            "{k}: every turn replicated"
        );
    }
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_turn_is_acknowledged_while_the_replica_is_stopped() {
    let mut redis = ReplicatedRedis::start();
    let prefix = fresh_prefix();
    let store = redis.store(&prefix, QUERY).await.expect("connect");
    let primary: Arc<dyn Store> = Arc::new(redis.store(&prefix, "").await.expect("connect"));
    let replica: Arc<dyn Store> = Arc::new(redis.replica_reader(&prefix).await);
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(store)
        .build()
        .unwrap();
    let keys: Vec<SessionKey> = (0..4).map(|s| key("u", &format!("p{s}"))).collect();
    for k in &keys {
        rt.call(k, "before")
            .await
            .expect("acknowledged with the replica up");
    }

    redis.pause_replica();
    let mut calls = Vec::new();
    for k in &keys {
        let (rt, k) = (rt.clone(), k.clone());
        calls.push(tokio::spawn(
            async move { rt.call(&k, "while stopped").await },
        ));
    }
    // The primary commits every turn...
    for k in &keys {
        eventually_stored(primary.as_ref(), k, 4).await;
    }
    // ...but none is acknowledged while the replica cannot confirm it.
    let all = futures::future::join_all(calls);
    tokio::pin!(all);
    let early = tokio::time::timeout(Duration::from_millis(300), &mut all).await;
    assert!(
        early.is_err(),
        "turns were acknowledged while the replica was stopped: {early:?}"
    );

    redis.resume_replica();
    let results = within(all).await;
    for (k, result) in keys.iter().zip(results) {
        let outcome = result
            .expect("task")
            .expect("acknowledged once the replica is back");
        on_replica(replica.as_ref(), k, outcome.seq, "while stopped").await;
    }
    rt.shutdown().await;
}
