//! Property: with `replicas=1` and the replica stopped, a turn is answered `NotReplicated`
//! within the replica timeout plus a margin — never `Ok` — while the primary holds it; once the
//! replica is back, the session's next turns succeed (no `Conflict`: the session went on from
//! what the primary holds) and the history is complete and in order, on the primary and on the
//! replica; a retry with the turn's request id is refused the same way while the replica is
//! still stopped, and gets its stored outcome (without running it again) once it is back.
//! The store answers the same for plain and fenced appends.
//!
//! Breakages caught: an append that reports `Ok` when `WAIT` counted too few replicas; a retry
//! answered `Ok` from the stored turn while no replica holds it; a
//! session that drops (or writes again) a turn the primary committed, whose next turn then
//! conflicts or duplicates it.
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::harness::{assert_dense, key, stored_events, stored_inputs, within};
use support::redis_replica::ReplicatedRedis;
use support::redis_server::fresh_prefix;
use turnstile::state::InputDisposition;
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Leases};
use turnstile::{CallOptions, EchoAgent, Error, Runtime, Store, StoreError};

/// The replica timeout these tests set: the store's default. A live replica confirms within a
/// few milliseconds, but on a machine busy with a whole test suite its process may wait for a
/// core for hundreds of them (a 300 ms timeout failed a turn with the replica running in CI).
const WAIT: Duration = Duration::from_secs(1);

/// Slack over [`WAIT`] for the round trips and a loaded machine.
const MARGIN: Duration = Duration::from_secs(3);

fn query() -> String {
    format!("replicas=1&replica_timeout_ms={}", WAIT.as_millis())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_stopped_replica_never_confirmed_is_kept_and_the_session_goes_on() {
    let mut redis = ReplicatedRedis::start();
    let prefix = fresh_prefix();
    let store = redis.store(&prefix, &query()).await.expect("connect");
    let primary: Arc<dyn Store> = Arc::new(redis.store(&prefix, "").await.expect("connect"));
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(store)
        .build()
        .unwrap();
    let k = key("u", "kept");
    within(rt.call(&k, "one")).await.expect("acknowledged");

    redis.pause_replica();
    let started = Instant::now();
    let retry = CallOptions::default().with_request_id("two-1");
    let refused = within(rt.call_with(&k, "two", retry.clone())).await;
    let took = started.elapsed();
    match &refused {
        Err(Error::Store { source, .. }) => match source.as_ref() {
            StoreError::NotReplicated {
                acked,
                wanted,
                version,
                ..
            } => assert_eq!((*acked, *wanted, *version), (0, 1, 2)),
            other => panic!("expected NotReplicated, got {other:?}"),
        },
        other => panic!("a turn short of replicas must not succeed: {other:?}"),
    }
    assert_eq!(refused.unwrap_err().code(), "not_replicated");
    assert!(
        took >= WAIT,
        "answered after {took:?}, before the replica timeout"
    );
    assert!(took < WAIT + MARGIN, "answered after {took:?}");
    let on_primary: Vec<String> = stored_inputs(primary.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(on_primary, ["one", "two"], "the primary holds the turn");

    // A retry while the replica is still stopped is refused the same way: the stored turn is
    // not acknowledged until a replica holds it.
    match within(rt.call_with(&k, "two", retry.clone())).await {
        Err(error) => assert_eq!(error.code(), "not_replicated", "{error}"),
        Ok(outcome) => panic!("a retry acknowledged a turn short of replicas: {outcome:?}"),
    }

    redis.resume_replica();
    redis.until_replica_caught_up().await;
    // A retry with the request id gets the stored turn's outcome once the replica has it; it
    // does not run again.
    let replayed = within(rt.call_with(&k, "two", retry))
        .await
        .expect("replayed");
    assert_eq!((replayed.output.as_str(), replayed.seq), ("two", 4));
    for input in ["three", "four"] {
        within(rt.call(&k, input))
            .await
            .unwrap_or_else(|e| panic!("{input} after the replica came back: {e}"));
    }
    let replica = redis.replica_reader(&prefix).await;
    for store in [primary.as_ref(), &replica as &dyn Store] {
        let events = stored_events(store, &k).await;
        assert_dense(&events);
        let inputs = stored_inputs(store, &k).await;
        let expected: Vec<(String, InputDisposition)> = ["one", "two", "three", "four"]
            .into_iter()
            .map(|t| (t.to_owned(), InputDisposition::Answered))
            .collect();
        assert_eq!(inputs, expected, "complete, in order, each once");
    }
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_fenced_appends_short_of_replicas_are_committed_and_refused() {
    let mut redis = ReplicatedRedis::start();
    let store = redis.fresh_store(&query()).await;
    let (plain, fenced) = (key("u", "plain"), key("u", "fenced"));
    let me = Claimant::new("http://127.0.0.1:1");
    let lease = match store
        .acquire(&fenced, &me, Duration::from_secs(30))
        .await
        .expect("acquire")
    {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    };
    redis.pause_replica();
    let short = store.append(&plain, 0, &turn_events(1, "p", None)).await;
    assert!(
        matches!(short, Err(StoreError::NotReplicated { version: 1, .. })),
        "{short:?}"
    );
    let short = store
        .append_fenced(&fenced, 0, &turn_events(1, "f", None), &lease)
        .await;
    assert!(
        matches!(short, Err(StoreError::NotReplicated { version: 1, .. })),
        "{short:?}"
    );
    let message = short.unwrap_err().to_string();
    assert!(
        message.contains("stored on the primary as version 1") && message.contains("0 of the 1"),
        "{message}"
    );
    redis.resume_replica();
    // Once the replica is back (the append's WAIT need not cover its catching up):
    // committed, the next appends build on version 1, and a write on base 0 conflicts.
    redis.until_replica_caught_up().await;
    assert_eq!(
        store
            .append(&plain, 1, &turn_events(3, "p2", None))
            .await
            .expect("next"),
        2
    );
    let again = store
        .append_fenced(&fenced, 1, &turn_events(3, "f2", None), &lease)
        .await;
    assert_eq!(again.expect("next fenced"), 2);
    let stale = store.append(&plain, 0, &turn_events(1, "p", None)).await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
}

/// A retry is never acknowledged from what the session holds in memory when the primary no
/// longer has the turn (here its head is set back one version, as a failover to a replica that
/// missed the turn would leave it): the replicas then vouch for the primary's data, not the
/// session's, and the retry is answered with the store's `Conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_refused_when_the_primary_no_longer_holds_the_turn() {
    let mut redis = ReplicatedRedis::start();
    let prefix = fresh_prefix();
    let store = redis.store(&prefix, &query()).await.expect("connect");
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(store)
        .build()
        .unwrap();
    let k = key("u", "lost");
    within(rt.call(&k, "one")).await.expect("acknowledged");
    redis.pause_replica();
    let retry = CallOptions::default().with_request_id("two-1");
    let refused = within(rt.call_with(&k, "two", retry.clone())).await;
    assert_eq!(refused.unwrap_err().code(), "not_replicated");
    redis.resume_replica();
    redis.until_replica_caught_up().await;

    let client = redis::Client::open(redis.url("")).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the primary");
    let heads: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:s:*:h"))
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    let [head] = heads.as_slice() else {
        panic!("one session head expected: {heads:?}")
    };
    let () = redis::cmd("HSET")
        .arg(head)
        .arg("v")
        .arg(1)
        .query_async(&mut conn)
        .await
        .expect("set the head back");

    let answer = within(rt.call_with(&k, "two", retry)).await;
    match &answer {
        Err(Error::Store { source, .. }) => match source.as_ref() {
            StoreError::Conflict {
                expected, found, ..
            } => assert_eq!((*expected, *found), (2, 1)),
            other => panic!("expected Conflict, got {other:?}"),
        },
        other => panic!("a retry acknowledged (or misanswered) a turn the primary lost: {other:?}"),
    }
    // The text is what the check met, not a failed write's.
    let message = answer.unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("session {k}: stored version is 1"))
            && !message.contains("persisted"),
        "{message}"
    );
}
