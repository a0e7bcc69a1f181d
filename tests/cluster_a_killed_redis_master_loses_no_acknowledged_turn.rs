//! The whole path across processes under a real fault: three `serve --cluster` processes on a
//! six-node Redis Cluster (three masters, each with a replica) with `replicas=1`, clients that
//! send each turn to a random process and retry it — same `Idempotency-Key`, to a random
//! process again — until it is acknowledged, and one master killed (`SIGKILL`) under that load
//! and restarted two seconds later (it rejoins as the replica of the master that took its
//! place; until then that shard has no replica, and its turns are answered `not_replicated`,
//! which the clients retry).
//! Afterwards, for every session: every acknowledged turn is stored exactly once, in the order
//! it was acknowledged, nothing else is stored, and no two different turns were acknowledged
//! with one sequence number.
//!
//! What it checks is the end-to-end promise: whatever happens on the way — refusals,
//! redirections, leases lost and taken, retries through other processes — no acknowledged turn
//! is lost, duplicated or reordered, and no two turns are acknowledged with one seq. The
//! individual causes it guards against have tests of their own (a session answering from
//! events it never stored, a retry forwarded without its key, `WAIT` not reaching the session's
//! master, one node's renewals stopping another's sessions).
#![cfg(all(feature = "http", feature = "redis"))]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;
use support::cluster::{random_below, Cluster, ClusterOptions, Member};
use support::redis_cluster::ClusterLayout;
use turnstile::state::EventKind;
use turnstile::SessionKey;

const CLIENTS: usize = 24;
const WARM_UP: Duration = Duration::from_millis(1500);
const AFTER_THE_KILL: Duration = Duration::from_secs(6);
/// A turn still not acknowledged this long after the load stopped fails the test.
const SETTLE: Duration = Duration::from_secs(45);

/// What one client had acknowledged: its inputs in order, with the seq each was answered with.
type Acked = Vec<(String, u64)>;

#[derive(Default)]
struct Tally {
    acknowledged: AtomicUsize,
    retried: AtomicUsize,
    /// Answers other than 200, by status and code, for the report.
    refusals: Mutex<BTreeMap<String, usize>>,
}

/// Sends one turn until it is acknowledged; answers its seq.
async fn until_acknowledged(
    client: &reqwest::Client,
    members: &[String],
    session: &str,
    input: &str,
    tally: &Tally,
) -> u64 {
    let deadline = Instant::now() + SETTLE;
    loop {
        assert!(Instant::now() < deadline, "{input} never acknowledged");
        let member = &members[random_below(members.len())];
        let sent = client
            .post(format!("{member}/v1/sessions/load/{session}/turns"))
            .header("idempotency-key", input)
            .json(&serde_json::json!({ "input": input }))
            .timeout(Duration::from_secs(15))
            .send()
            .await;
        let refusal = match sent {
            Ok(response) if response.status() == 200 => {
                let body: Value = response.json().await.expect("a JSON outcome");
                let output = body["output"].as_str().unwrap_or_default();
                assert!(output.ends_with(&format!("to: {input}")), "{body}");
                return body["seq"].as_u64().expect("a seq");
            }
            Ok(response) => {
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or_default();
                let code = body["error"]["code"].as_str().unwrap_or("?").to_owned();
                assert!(
                    matches!(status, 409 | 421 | 502 | 503 | 504),
                    "{input}: an answer a retry cannot mend: {status} {body}"
                );
                format!("{status} {code}")
            }
            Err(error) if error.is_connect() => "connection refused".to_owned(),
            Err(error) => format!("request failed: {}", error.is_timeout()),
        };
        *tally.refusals.lock().entry(refusal).or_default() += 1;
        tally.retried.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50 + random_below(100) as u64)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_loses_no_acknowledged_turn() {
    let options = ClusterOptions {
        lease_ttl: 2.0,
        latency_ms: 5,
        chunks: 1,
        request_timeout: 10.0,
        store_query: "replicas=1&replica_timeout_ms=2000".into(),
    };
    let layout = ClusterLayout {
        replicas: true,
        args: Vec::new(),
    };
    let mut cluster = Cluster::start_on_redis_cluster_with(3, options, layout).await;
    let members: Arc<Vec<String>> = Arc::new(
        cluster
            .members
            .iter()
            .map(|m: &Member| m.base.clone())
            .collect(),
    );
    let client = reqwest::Client::new();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let (client, members, stop, tally) =
            (client.clone(), members.clone(), stop.clone(), tally.clone());
        clients.push(tokio::spawn(async move {
            let session = format!("s{c}");
            let mut acked: Acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let input = format!("c{c}-t{i}");
                let seq = until_acknowledged(&client, &members, &session, &input, &tally).await;
                tally.acknowledged.fetch_add(1, Ordering::Relaxed);
                acked.push((input, seq));
                i += 1;
            }
            (session, acked)
        }));
    }

    tokio::time::sleep(WARM_UP).await;
    let redis = cluster.redis_cluster().expect("a Redis Cluster");
    let victim = redis.master_of(&SessionKey::new("load", "s0").expect("key"));
    let before = tally.acknowledged.load(Ordering::Relaxed);
    redis.kill(victim);
    let killed = Instant::now();
    for second in 0..AFTER_THE_KILL.as_secs() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if second == 1 {
            let redis = cluster.redis_cluster().expect("a Redis Cluster");
            redis.restart(victim);
        }
        println!(
            "{:?} after the kill: {} acknowledged, refusals {:?}",
            killed.elapsed(),
            tally.acknowledged.load(Ordering::Relaxed),
            tally.refusals.lock()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    for task in clients {
        acknowledged.push(task.await.expect("a client"));
    }
    let redis = cluster.redis_cluster().expect("a Redis Cluster");
    redis.until_healed();
    let total = tally.acknowledged.load(Ordering::Relaxed);
    println!(
        "{total} turns acknowledged ({before} before the kill at {:?}), {} retries: {:?}",
        killed.elapsed(),
        tally.retried.load(Ordering::Relaxed),
        tally.refusals.lock()
    );
    assert!(
        before > 0 && total > before,
        "load ran on both sides of the kill"
    );

    let store = cluster.store().await;
    let mut lost = 0;
    for (session, acked) in &acknowledged {
        let key = SessionKey::new("load", session.as_str()).expect("key");
        let events = turnstile::store::read_log(store.as_ref(), &key, u64::MAX, 1_000)
            .await
            .expect("read the log");
        let inputs: Vec<(u64, String)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::UserInput { text, .. } => Some((e.seq, text.clone())),
                _ => None,
            })
            .collect();
        let stored: Vec<&str> = inputs.iter().map(|(_, t)| t.as_str()).collect();
        let wanted: Vec<&str> = acked.iter().map(|(t, _)| t.as_str()).collect();
        if stored != wanted {
            lost += 1;
            eprintln!("{session}: acknowledged {wanted:?}\n  stored {stored:?}");
            continue;
        }
        // Each acknowledged seq is its own turn's output, right after its input.
        for ((input, seq), (input_seq, _)) in acked.iter().zip(&inputs) {
            assert_eq!(
                *seq,
                input_seq + 1,
                "{session}: {input} was acknowledged with seq {seq}, stored at {input_seq}"
            );
        }
    }
    assert_eq!(
        lost, 0,
        "{lost} sessions lost, duplicated or reordered acknowledged turns"
    );
}
