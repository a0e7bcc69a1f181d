//! `kill -9` of one of three `serve --cluster` processes while every session takes turns: every
//! turn a caller saw acknowledged is in the store afterwards, at the seq it was told, and each
//! session the dead process owned is served again by another process within the lease TTL plus
//! one second of the kill (the failover times are printed).

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::cluster::{random_below, turn, Cluster, ClusterOptions};
use support::harness::{
    assert_dense, eventually, eventually_ok_within, key, stored_events, TIMEOUT,
};
use turnstile::state::EventKind;

const LEASE_TTL: Duration = Duration::from_secs(2);
const SESSIONS: usize = 30;
/// Acknowledged turns before the kill.
const BEFORE_KILL: usize = 90;
/// Pause between a caller's attempts after a refusal: the back-off of a client, not a wait
/// for anything in particular.
const BACKOFF: Duration = Duration::from_millis(20);

/// One acknowledged turn.
struct Ack {
    input: String,
    seq: u64,
    at: Instant,
    /// The request was sent after the kill: an answer to one sent before may still arrive
    /// from the dead process a moment after it died.
    sent_after_kill: bool,
    served_by: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_a_killed_owner_fail_over_within_the_lease_ttl() {
    let options = ClusterOptions {
        lease_ttl: LEASE_TTL.as_secs_f64(),
        latency_ms: 10,
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(3, options).await;
    let client = reqwest::Client::new();
    let user = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    // Spread ownership: session i is first taken by process i % 3.
    for s in 0..SESSIONS {
        let member = &cluster.members[s % 3];
        let answer = turn(
            &client,
            member,
            &user,
            &format!("s{s}"),
            &format!("s{s}-first"),
        )
        .await
        .expect("an answer");
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.served_by, member.base);
    }
    let victim = cluster.members[0].base.clone();
    let owned_by_victim: Vec<usize> = (0..SESSIONS).filter(|s| s % 3 == 0).collect();

    let killed = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let acked_total = Arc::new(AtomicUsize::new(0));
    // Sessions with an acknowledged turn since the kill.
    let since_kill: Arc<Vec<AtomicBool>> =
        Arc::new((0..SESSIONS).map(|_| AtomicBool::new(false)).collect());
    let bases: Arc<Vec<String>> =
        Arc::new(cluster.members.iter().map(|m| m.base.clone()).collect());
    let mut callers = Vec::new();
    for s in 0..SESSIONS {
        let (client, user, bases) = (client.clone(), user.clone(), bases.clone());
        let (killed, stop, acked_total) = (killed.clone(), stop.clone(), acked_total.clone());
        let since_kill = since_kill.clone();
        callers.push(tokio::spawn(async move {
            let (mut acks, mut attempt) = (Vec::new(), 0);
            while !stop.load(Ordering::SeqCst) {
                attempt += 1;
                // Like a load balancer, stop sending to the dead process once it is known dead.
                let alive = if killed.load(Ordering::SeqCst) {
                    &bases[1..]
                } else {
                    &bases[..]
                };
                let base = &alive[random_below(alive.len())];
                let input = format!("s{s}-a{attempt}");
                let sent_after_kill = killed.load(Ordering::SeqCst);
                let member = support::cluster::Member::at(base);
                match turn(&client, &member, &user, &format!("s{s}"), &input).await {
                    Ok(answer) if answer.status == 200 => {
                        let seq = answer.body["seq"].as_u64().expect("a seq");
                        let served_by = answer.served_by;
                        acks.push(Ack {
                            input,
                            seq,
                            at: Instant::now(),
                            sent_after_kill,
                            served_by,
                        });
                        acked_total.fetch_add(1, Ordering::SeqCst);
                        if sent_after_kill {
                            since_kill[s].store(true, Ordering::SeqCst);
                        }
                    }
                    Ok(answer) => {
                        let code = answer.body["error"]["code"].as_str().unwrap_or_default();
                        assert!(
                            matches!(
                                code,
                                "owner_unreachable"
                                    | "owner_failed"
                                    | "not_owner"
                                    | "fenced"
                                    | "store_unavailable"
                                    // A turn that outlived its request, or the rare race in
                                    // which the session moved twice during one forward.
                                    | "timeout"
                                    | "owned_elsewhere"
                            ),
                            "an unexpected refusal {}: {}",
                            answer.status,
                            answer.body
                        );
                        tokio::time::sleep(BACKOFF).await;
                    }
                    Err(_) => tokio::time::sleep(BACKOFF).await,
                }
            }
            (s, acks)
        }));
    }

    eventually("the load to get going", || {
        acked_total.load(Ordering::SeqCst) >= BEFORE_KILL
    })
    .await;
    cluster.members[0].kill();
    let killed_at = Instant::now();
    killed.store(true, Ordering::SeqCst);

    // Run until every session was served again since the kill. The callers measure the
    // failover times themselves; this only decides when the load stops.
    eventually_ok_within(
        "every session to be served again since the kill",
        LEASE_TTL + TIMEOUT,
        Duration::from_millis(20),
        || async {
            let waiting: Vec<usize> = (0..SESSIONS)
                .filter(|&s| !since_kill[s].load(Ordering::SeqCst))
                .collect();
            if waiting.is_empty() {
                Ok(())
            } else {
                Err(format!("sessions {waiting:?} not yet"))
            }
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut done: HashMap<usize, Vec<Ack>> = HashMap::new();
    for caller in callers {
        let (s, acks) = caller.await.expect("the caller ran");
        done.insert(s, acks);
    }
    let served_again = owned_by_victim
        .iter()
        .all(|s| done[s].iter().any(|a| a.sent_after_kill));
    assert!(
        served_again,
        "some of the dead process's sessions were never served again"
    );

    let mut failovers: Vec<Duration> = owned_by_victim
        .iter()
        .map(|s| {
            let first = done[s]
                .iter()
                .find(|a| a.sent_after_kill)
                .expect("served again");
            assert_ne!(first.served_by, victim);
            first.at - killed_at
        })
        .collect();
    failovers.sort();
    println!(
        "failover of {} sessions after kill -9 (lease TTL {LEASE_TTL:?}): min {:?}, median {:?}, max {:?}",
        failovers.len(),
        failovers[0],
        failovers[failovers.len() / 2],
        failovers[failovers.len() - 1]
    );
    let bound = LEASE_TTL + Duration::from_secs(1);
    assert!(
        failovers.iter().all(|f| *f <= bound),
        "failover over {bound:?}: {failovers:?}"
    );

    let store = cluster.store().await;
    let mut total = 0;
    for (s, acks) in &done {
        let events = stored_events(store.as_ref(), &key(&user, &format!("s{s}"))).await;
        assert_dense(&events);
        for ack in acks {
            let answered = events
                .iter()
                .position(|e| e.seq == ack.seq)
                .and_then(|i| i.checked_sub(1));
            let input = answered.map(|i| &events[i].kind);
            assert!(
                matches!(input, Some(EventKind::UserInput { text, .. }) if *text == ack.input),
                "s{s}: acknowledged {} at seq {} is not stored there",
                ack.input,
                ack.seq
            );
            total += 1;
        }
    }
    println!("{total} acknowledged turns, all stored");
}
