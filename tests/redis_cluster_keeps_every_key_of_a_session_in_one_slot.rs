//! On a real Redis Cluster, every key one session's scripts touch (head, log, lease, epoch
//! counter) hashes to one slot, and that
//! slot is the one of the session's documented hash tag — the first 16 hex digits of the
//! SHA-256 of its canonical encoding (`docs/stores.md`) — whatever the ids hold: braces, `*`,
//! `%`-escapes, 256-byte ids, unicode. So no id can choose its slot or split its session.
//!
//! The slots are asked of the cluster itself (`CLUSTER KEYSLOT`), and the keys are found by
//! listing each node (`KEYS`), so the test does not trust the store's own idea of its names.
#![cfg(feature = "redis")]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use turnstile::backend::RedisOptions;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Leases};
use turnstile::{SessionKey, Store};

use support::redis_cluster::RedisCluster;
use support::redis_server::fresh_prefix;

/// The documented canonical encoding: `s`, then each id as 8-byte big-endian length + bytes.
fn canonical(key: &SessionKey) -> Vec<u8> {
    let mut out = vec![b's'];
    for id in [key.user_id(), key.session_id()] {
        out.extend_from_slice(&(id.len() as u64).to_be_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// The documented hash tag of a session, braces included.
fn tag(key: &SessionKey) -> String {
    let hex: String = Sha256::digest(canonical(key))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{{{}}}", &hex[..16])
}

async fn keyslot(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(name)
        .query_async(conn)
        .await
        .expect("CLUSTER KEYSLOT")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_session_hashes_to_the_slot_of_its_tag() {
    let cluster = RedisCluster::start();
    let mut nodes = cluster.node_connections().await;
    let long = "x".repeat(turnstile::key::MAX_ID_BYTES);
    let keys = [
        SessionKey::new("alice", "s1").expect("key"),
        SessionKey::new("{alice}", "{s1}").expect("key"),
        SessionKey::new("a}{b", "}{").expect("key"),
        SessionKey::new("*", "?*[a-z]").expect("key"),
        SessionKey::new("%7B%7D", "%2F..%2F").expect("key"),
        SessionKey::new(long.as_str(), long.as_str()).expect("key"),
        SessionKey::new("用户 ✓", "会话 {x}").expect("key"),
        SessionKey::anonymous("{anon}").expect("key"),
    ];
    for key in &keys {
        // A fresh prefix per session, so that every `:s:` key found below is this session's.
        let prefix = fresh_prefix();
        let store = cluster
            .store_with(RedisOptions::default().with_prefix(prefix.clone()))
            .await;
        let delta: StateDelta = [("user:seen".to_owned(), json!(true))].into();
        let me = Claimant::new("http://a");
        let lease = match store.acquire(key, &me, Duration::from_secs(60)).await {
            Ok(Claim::Granted(lease)) => lease,
            other => panic!("{key}: a fresh session's lease, got {other:?}"),
        };
        let v1 = store
            .append_fenced(key, 0, &turn_events(1, "first", Some(delta)), &lease)
            .await
            .expect("append");
        store
            .append(key, v1, &turn_events(3, "second", None))
            .await
            .expect("append");

        let mut found = BTreeSet::new();
        let mut holders = 0;
        for node in &mut nodes {
            let names: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{prefix}:s:*"))
                .query_async(node)
                .await
                .expect("KEYS");
            holders += usize::from(!names.is_empty());
            found.extend(names);
        }
        assert_eq!(
            found.len(),
            4,
            "{key}: a head, a log, a lease and an epoch counter, found {found:?}"
        );
        assert_eq!(holders, 1, "{key}: all on one node");
        let expected = keyslot(&mut nodes[0], &tag(key)).await;
        for name in &found {
            assert!(name.contains(&tag(key)), "{key}: {name} carries its tag");
            assert_eq!(
                keyslot(&mut nodes[0], name).await,
                expected,
                "{key}: {name} is in the slot of the session's tag"
            );
            let ids_outside = !name.contains(key.session_id()) || key.session_id().len() < 3;
            assert!(ids_outside, "{key}: no raw id in the key name {name}");
        }
        let loaded = store.load(key, 10).await.expect("load");
        assert_eq!(loaded.events.len(), 4);
        if !key.is_anonymous() {
            assert_eq!(loaded.user_state.get("seen"), Some(&json!(true)));
        }
    }
}
