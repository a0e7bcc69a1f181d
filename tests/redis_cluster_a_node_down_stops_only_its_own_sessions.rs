//! On a real Redis Cluster, one master going down stops only the sessions whose lease lives on
//! it: their renewals go unanswered and they lapse, while sessions on the other masters keep
//! their leases (every renewal of theirs is answered) and go on serving turns. Turns run on
//! every session all through the kill, as they would in production.
//!
//! Two failures it guards against: a renewal batch that failed as a whole when one node was
//! down, taking every session with it; and the cluster client of the `redis` crate wedging for
//! good after the node went away (its slot-map rebuild waiting on a command it no longer
//! drives), which stopped every command of the process and so every lease — in about one run
//! in four without turns running, and five in six with them. The store's watchdog replaces a wedged
//! client.
//!
//! The cluster runs without replicas and with `cluster-require-full-coverage no`, so that the
//! other masters keep serving their slots while one is down: the window before a failover, held
//! open.
#![cfg(feature = "redis")]

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use support::harness::{eventually, eventually_ok_within, stored_events, within};
use support::redis_cluster::{ClusterLayout, RedisCluster};
use support::redis_server::fresh_prefix;
use turnstile::backend::RedisOptions;
use turnstile::config::Ownership;
use turnstile::state::EventKind;
use turnstile::{EchoAgent, Runtime, SessionKey, Store};

/// The default TTL ([`turnstile::config::DEFAULT_LEASE_TTL`]), long enough for the cluster client's own repair after a node is lost: while
/// it asks the cluster for its layout again, every command of the process waits, and a lease
/// whose local deadline (four fifths of the TTL) fell inside that wait would lapse whatever its
/// node. The repair can take more than one replacement of the client (a fresh one can stop
/// answering too, on its first command for the lost node's slots): on a loaded two-core machine
/// every renewal failed for up to 2.5 s after the kill, and a 5 s TTL (4 s local deadline, the
/// last renewal up to a third of it before the kill) then lost healthy leases in about one run
/// in ten.
const LEASE_TTL: Duration = turnstile::config::DEFAULT_LEASE_TTL;
const SESSIONS: usize = 30;
/// The pause between two turns of one session: 600 turns a second in all.
const PACE: Duration = Duration::from_millis(50);

/// What each session's caller sent and what was acknowledged, in order.
#[derive(Default)]
struct Sent {
    sent: Vec<String>,
    acknowledged: Vec<String>,
}

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
    let leases = store.leases().expect("the redis store keeps leases");
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(Arc::clone(&store))
        .with_ownership(Ownership::new("http://a").with_lease_ttl(LEASE_TTL))
        .build()
        .expect("runtime");
    let mut by_master: BTreeMap<u16, Vec<SessionKey>> = BTreeMap::new();
    let mut epochs = BTreeMap::new();
    for i in 0..SESSIONS {
        let key = SessionKey::new("alice", format!("s{i}")).expect("key");
        within(rt.call(&key, "hello")).await.expect("a first turn");
        let owner = leases.owner(&key).await.expect("owner").expect("a lease");
        epochs.insert(key.clone(), owner.epoch);
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

    // Turns on every session from here on, until the end.
    let stop = Arc::new(AtomicBool::new(false));
    let mut callers = Vec::new();
    let mut tallies = BTreeMap::new();
    for key in by_master.values().flatten() {
        let tally = Arc::new(Mutex::new(Sent::default()));
        tallies.insert(key.clone(), Arc::clone(&tally));
        let (rt, key, stop) = (rt.clone(), key.clone(), Arc::clone(&stop));
        callers.push(tokio::spawn(async move {
            let mut pace = tokio::time::interval(PACE);
            for n in 0.. {
                pace.tick().await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let input = format!("t{n}");
                tally.lock().sent.push(input.clone());
                if rt.call(&key, input.clone()).await.is_ok() {
                    tally.lock().acknowledged.push(input);
                }
            }
        }));
    }
    let acknowledged = |key: &SessionKey| tallies[key].lock().acknowledged.len();
    eventually("turns on every session before the kill", || {
        tallies.keys().all(|key| acknowledged(key) >= 3)
    })
    .await;

    let (&dead, lost) = by_master.iter().next().expect("a master");
    let lost = lost.clone();
    cluster.kill(dead);
    let killed = std::time::Instant::now();
    // Past the lease TTL, the dead master's sessions have lapsed and stopped (their callers'
    // turns meet a store that does not answer, and activate nothing).
    for key in &lost {
        eventually_ok_within(
            &format!("{key} to stop"),
            LEASE_TTL * 2,
            Duration::from_millis(50),
            || async {
                if rt.is_live(key) {
                    Err("live")
                } else {
                    Ok(())
                }
            },
        )
        .await;
    }
    println!(
        "the dead master's sessions stopped {:?} after the kill",
        killed.elapsed()
    );
    // The window in which a wedged client would have let every other lease lapse, held open.
    tokio::time::sleep(LEASE_TTL).await;
    let healthy: Vec<&SessionKey> = by_master
        .iter()
        .filter(|(&m, _)| m != dead)
        .flat_map(|(_, keys)| keys)
        .collect();
    let before: BTreeMap<&SessionKey, usize> = healthy
        .iter()
        .map(|&key| (key, acknowledged(key)))
        .collect();
    for &key in &healthy {
        eventually_ok_within(
            &format!("more acknowledged turns of {key}"),
            Duration::from_secs(5),
            Duration::from_millis(50),
            || async {
                let now = acknowledged(key);
                if now > before[key] {
                    Ok(())
                } else {
                    Err(format!("{now} acknowledged"))
                }
            },
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        within(caller).await.expect("a caller");
    }

    for &key in &healthy {
        let owner = leases.owner(key).await.expect("owner").expect("a lease");
        assert_eq!(
            owner.epoch, epochs[key],
            "{key} on a healthy master lost its lease with the dead one (granted again since)"
        );
        let stored: Vec<String> = stored_events(store.as_ref(), key)
            .await
            .into_iter()
            .filter_map(|event| match event.kind {
                EventKind::UserInput { text, .. } if text != "hello" => Some(text),
                _ => None,
            })
            .collect();
        let tally = tallies[key].lock();
        let distinct: HashSet<&String> = stored.iter().collect();
        assert_eq!(distinct.len(), stored.len(), "{key}: a turn stored twice");
        let sent: HashSet<&String> = tally.sent.iter().collect();
        assert!(
            stored.iter().all(|input| sent.contains(input)),
            "{key}: something stored that was never sent"
        );
        // Acknowledged turns are stored, in the order they were sent (a turn that failed may
        // or may not have been stored before it failed).
        let mut rest = stored.iter();
        for input in &tally.acknowledged {
            assert!(
                rest.any(|s| s == input),
                "{key}: acknowledged {input} is not stored after the turns before it"
            );
        }
    }
}
