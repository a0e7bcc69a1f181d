//! On a real Redis Cluster, one master going down stops only the sessions whose lease lives on
//! it: their renewals go unanswered and they lapse, while sessions on the other masters keep
//! their leases (every renewal of theirs is answered) and go on serving turns. A renewal batch
//! that failed as a whole when one node was down used to take every session with it.
//!
//! The cluster runs without replicas and with `cluster-require-full-coverage no`, so that the
//! other masters keep serving their slots while one is down: the window before a failover, held
//! open.
#![cfg(feature = "redis")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use support::harness::{eventually_ok_within, within};
use support::redis_cluster::{ClusterLayout, RedisCluster};
use support::redis_server::fresh_prefix;
use turnstile::backend::RedisOptions;
use turnstile::config::Ownership;
use turnstile::{EchoAgent, Runtime, SessionKey, Store};

/// Long enough for the cluster client's own repair after a node is lost: while it asks the
/// cluster for its layout again, every command of the process waits (about a second here), and
/// a lease whose local deadline (four fifths of the TTL) fell inside that wait would lapse
/// whatever its node.
const LEASE_TTL: Duration = Duration::from_secs(5);
const SESSIONS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_unanswered_by_a_dead_master_stop_only_its_sessions() {
    let mut cluster = RedisCluster::start_with(ClusterLayout {
        replicas: false,
        args: vec!["--cluster-require-full-coverage".into(), "no".into()],
    });
    let options = RedisOptions::default()
        .with_prefix(fresh_prefix())
        .with_response_timeout(Duration::from_millis(300));
    let store: Arc<dyn Store> = Arc::new(cluster.store_with(options).await);
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .with_ownership(Ownership::new("http://a").with_lease_ttl(LEASE_TTL))
        .build()
        .expect("runtime");
    let mut by_master: BTreeMap<u16, Vec<SessionKey>> = BTreeMap::new();
    for i in 0..SESSIONS {
        let key = SessionKey::new("alice", format!("s{i}")).expect("key");
        within(rt.call(&key, "hello")).await.expect("a first turn");
        by_master
            .entry(cluster.master_of(&key))
            .or_default()
            .push(key);
    }
    assert_eq!(
        by_master.len(),
        3,
        "sessions on every master: {by_master:?}"
    );
    let (&dead, lost) = by_master.iter().next().expect("a master");
    let lost = lost.clone();
    cluster.kill(dead);
    let killed = std::time::Instant::now();

    // Past the lease TTL, the dead master's sessions have lapsed and stopped.
    for key in &lost {
        support::harness::eventually(&format!("{key} to stop"), || !rt.is_live(key)).await;
    }
    println!(
        "the dead master's sessions stopped {:?} after the kill",
        killed.elapsed()
    );
    tokio::time::sleep(LEASE_TTL).await;
    for (master, keys) in by_master.iter().filter(|(&m, _)| m != dead) {
        for key in keys {
            assert!(
                rt.is_live(key),
                "{key} on healthy master {master} lost its lease with the dead one"
            );
            let outcome = eventually_ok_within(
                &format!("a turn of {key}"),
                Duration::from_secs(5),
                Duration::from_millis(50),
                || rt.call(key, "still here"),
            )
            .await;
            assert_eq!(outcome.seq, 4, "{key} goes on from its history");
        }
    }
}
