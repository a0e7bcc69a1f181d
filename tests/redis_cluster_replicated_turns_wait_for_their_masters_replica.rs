//! On a real Redis Cluster with a replica per master, `replicas=1` acknowledges a turn only once
//! the replica of the session's own master holds it: every acknowledged turn is already in that
//! replica's copy of the log, and while that replica is stopped the session's turns are stored
//! on its master but not acknowledged — while the sessions of the other masters go on being
//! acknowledged. So `WAIT` is sent to the session's master, on the connection of the append.
//!
//! Breakage caught: `WAIT` routed anywhere but the session's master (another master's replicas
//! would vouch for it, or every master would be asked and the slowest would hold all turns).
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::{eventually_stored, within};
use support::redis_cluster::{log_length_on, ClusterLayout, RedisCluster};
use support::redis_server::fresh_prefix;
use turnstile::backend::RedisOptions;
use turnstile::{EchoAgent, Runtime, SessionKey, Store};

fn replicated(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(prefix)
        .with_replicas(1)
        .with_replica_timeout(Duration::from_secs(8))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_wait_for_the_replica_of_their_own_master() {
    let cluster = RedisCluster::start_with(ClusterLayout {
        replicas: true,
        args: Vec::new(),
    });
    let prefix = fresh_prefix();
    let store: Arc<dyn Store> = Arc::new(cluster.store_with(replicated(&prefix)).await);
    let plain: Arc<dyn Store> = Arc::new(
        cluster
            .store_with(RedisOptions::default().with_prefix(&prefix))
            .await,
    );
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .expect("runtime");

    // Every acknowledged turn is on its master's replica the moment its call returns.
    let keys: Vec<SessionKey> = (0..12)
        .map(|i| SessionKey::new("u", format!("s{i}")).expect("key"))
        .collect();
    for key in &keys {
        let replica = cluster.replica_of(cluster.master_of(key));
        for turn in 1..=3 {
            let outcome = within(rt.call(key, format!("t{turn}")))
                .await
                .expect("acked");
            assert_eq!(outcome.seq, 2 * turn);
            assert_eq!(
                log_length_on(replica, &prefix, key),
                2 * turn as i64,
                "{key}: acknowledged, and on its master's replica"
            );
        }
    }

    // The replica of one master stops: its sessions' turns are stored, not acknowledged; the
    // others' are acknowledged as before.
    let held = &keys[0];
    let master = cluster.master_of(held);
    let stopped = cluster.replica_of(master);
    let other = keys
        .iter()
        .find(|k| cluster.master_of(k) != master)
        .expect("a session on another master");
    cluster.pause(stopped);
    let call = tokio::spawn({
        let (rt, held) = (rt.clone(), held.clone());
        async move { rt.call(&held, "while stopped").await }
    });
    eventually_stored(plain.as_ref(), held, 8).await;
    within(rt.call(other, "elsewhere"))
        .await
        .expect("another master's replica confirms its own sessions' turns");
    assert!(
        !call.is_finished(),
        "a turn was acknowledged while its master's replica was stopped"
    );
    cluster.resume(stopped);
    let outcome = within(call)
        .await
        .expect("task")
        .expect("acknowledged once the replica is back");
    assert_eq!(outcome.seq, 8);
    assert_eq!(log_length_on(stopped, &prefix, held), 8);
    rt.shutdown().await;
}
