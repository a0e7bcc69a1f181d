//! Property: replica settings that cannot work are refused when the store opens, with an error
//! naming the setting — a value that is not a number, a timeout of 0 (`WAIT` would block for
//! ever), more replicas than allowed, `replicas` on a Redis Cluster URL, or a replica's URL —
//! and never reach a running store; likewise lanes out of range or in a Cluster URL. Through
//! `open_store` (every command's `--store`) too.
#![cfg(feature = "redis")]

mod support;

use turnstile::backend::{open_store, OpenStoreError, RedisOptions, RedisStore, StoreUrl};
use turnstile::StoreError;

use support::cli::turnstile;
use support::redis_replica::ReplicatedRedis;
use support::redis_server::free_port;

/// Connects to `url` and expects a refusal whose message says all of `says`.
async fn refused(url: &str, says: &[&str]) {
    let result = RedisStore::connect(url, RedisOptions::default()).await;
    match result {
        Err(StoreError::InvalidRequest(message)) => {
            for part in says {
                assert!(message.contains(part), "{url}: {message:?} lacks {part:?}");
            }
        }
        other => panic!("{url}: expected InvalidRequest, got {other:?}"),
    }
}

/// Lanes out of range, or given to a Cluster (which keeps a connection per node), are refused
/// before anything connects.
#[tokio::test]
async fn bad_lanes_are_refused_before_connecting() {
    let at = format!("redis://127.0.0.1:{}/", free_port());
    refused(&format!("{at}?lanes=0"), &["lanes=0", "1..=16"]).await;
    refused(&format!("{at}?lanes=17"), &["lanes=17"]).await;
    refused(&format!("{at}?lanes=x"), &["lanes", "whole number"]).await;
    let cluster = format!("redis+cluster://127.0.0.1:{}/?lanes=2", free_port());
    refused(&cluster, &["lanes", "single server"]).await;
}

/// Bad values are refused before anything connects: no server listens at these ports.
#[tokio::test]
async fn bad_values_are_refused_before_connecting() {
    let at = format!("redis://127.0.0.1:{}/", free_port());
    refused(
        &format!("{at}?replicas=x"),
        &["replicas", "\"x\"", "whole number"],
    )
    .await;
    refused(&format!("{at}?replicas=-1"), &["replicas", "whole number"]).await;
    refused(
        &format!("{at}?replicas=17"),
        &["replicas=17", "more than 16"],
    )
    .await;
    refused(
        &format!("{at}?replicas=1&replica_timeout_ms=0"),
        &["replica_timeout_ms=0", "outside 1..=60000"],
    )
    .await;
    refused(
        &format!("{at}?replica_timeout_ms=soon"),
        &["replica_timeout_ms", "whole number"],
    )
    .await;
    refused(
        &format!("{at}?replica_connections=0"),
        &["replica_connections=0", "outside 1..=1024"],
    )
    .await;
}

#[tokio::test]
async fn open_store_names_the_url_and_the_setting() {
    let text = format!("redis://127.0.0.1:{}/?replicas=two", free_port());
    let url = StoreUrl::parse(&text).expect("a redis spelling");
    let err = open_store(&url).await.unwrap_err();
    assert!(
        matches!(
            &err,
            OpenStoreError::Store {
                source: StoreError::InvalidRequest(_),
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&text) && message.contains("replicas=\"two\" is not a whole number"),
        "{message}"
    );
}

#[test]
fn the_cli_exits_naming_the_setting() {
    let store = format!(
        "redis://127.0.0.1:{}/?replica_timeout_ms=0&replicas=1",
        free_port()
    );
    let run = turnstile(&["load", "--store", &store, "--sessions", "2", "--turns", "1"]);
    assert!(!run.success, "a bad replica setting must stop the run");
    assert!(
        run.stderr.contains("cannot open the store")
            && run
                .stderr
                .contains("replica_timeout_ms=0 is outside 1..=60000"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn a_replicas_own_url_is_refused_and_the_primarys_accepted() {
    let redis = ReplicatedRedis::start();
    refused(
        &format!("{}?replicas=1", redis.replica_url()),
        &["replicas=N", "is a replica"],
    )
    .await;
    let store = RedisStore::connect(&redis.url("replicas=1"), RedisOptions::default()).await;
    assert!(store.is_ok(), "{store:?}");
}
