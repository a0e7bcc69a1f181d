//! Three `turnstile serve --cluster` processes on one Redis; 200 sessions, each with several
//! callers, each turn sent to a random process: every turn succeeds, each session's log is
//! dense and holds every acknowledged input once, at the seq its caller was told, in the order
//! each caller sent them; and a sampler asking each process what it holds never sees two
//! processes hold one session at once.
//!
//! The sampler's check is sound, not statistical: it asks process A, then B and C, then A
//! again. If A answered "live, lease epoch E" both times, A held the session without a break
//! through B's and C's answers (one holding, one epoch), so either of them also answering
//! "live" is two holders at one instant.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use support::cluster::{random_below, turn, view, Cluster, ClusterOptions, View};
use support::harness::{assert_dense, key, stored_events};
use turnstile::state::EventKind;

const PROCESSES: usize = 3;
const SESSIONS: usize = 200;
const CALLERS: usize = 3;
const TURNS: usize = 5;
/// Sampler tasks: each asks about one session at a time, while the callers load the processes.
const SAMPLERS: usize = 16;

/// One sampler round's verdict: `None` when A's two answers do not bracket one holding.
fn two_holders(round: &[View; 4]) -> Option<bool> {
    let [first, b, c, last] = round;
    let bracketed = first.live
        && last.live
        && first.owner_epoch.is_some()
        && first.owner_epoch == last.owner_epoch;
    bracketed.then_some(b.live || c.live)
}

type Sampled = (usize, usize, Vec<(String, [View; 4])>);

/// Asks A, B, C, A about random sessions until `done`: rounds, decisive rounds, violations.
async fn sample(
    cluster: &Cluster,
    client: &reqwest::Client,
    user: &str,
    done: &AtomicBool,
    sessions: usize,
) -> Sampled {
    let (mut rounds, mut decisive, mut violations) = (0usize, 0usize, Vec::new());
    while !done.load(Ordering::SeqCst) {
        let session = format!("s{}", random_below(sessions));
        let start = random_below(PROCESSES);
        let mut views = Vec::new();
        for i in [0, 1, 2, 0] {
            let member = &cluster.members[(start + i) % PROCESSES];
            views.push(view(client, member, user, &session).await);
        }
        let round: [View; 4] = views.try_into().expect("four answers");
        match two_holders(&round) {
            Some(true) => violations.push((session, round)),
            Some(false) => decisive += 1,
            None => {}
        }
        rounds += 1;
    }
    (rounds, decisive, violations)
}

fn options() -> ClusterOptions {
    ClusterOptions {
        lease_ttl: 5.0,
        latency_ms: 5,
        // Every turn must succeed: leave room for a slow moment of a loaded machine.
        request_timeout: 30.0,
        ..ClusterOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_serve_every_turn_in_order_with_one_owner() {
    let cluster = Cluster::start(PROCESSES, options()).await;
    serve_and_check(cluster, SESSIONS).await;
}

/// The same on a Redis Cluster of three masters started by the test (`redis+cluster://`), with
/// fewer sessions: its three servers share the machine's two cores with the processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_on_a_redis_cluster_serve_every_turn_in_order_with_one_owner() {
    let cluster = Cluster::start_on_redis_cluster(PROCESSES, options()).await;
    serve_and_check(cluster, SESSIONS / 4).await;
}

/// Sends `CALLERS × TURNS` turns to each of `sessions` sessions, each to a random process, while
/// samplers look for two holders of one session; then checks the store.
async fn serve_and_check(cluster: Cluster, sessions: usize) {
    let cluster = Arc::new(cluster);
    let client = reqwest::Client::new();
    let user = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let started = Instant::now();

    let done = Arc::new(AtomicBool::new(false));
    let samplers: Vec<_> = (0..SAMPLERS)
        .map(|_| {
            let (cluster, client, user, done) =
                (cluster.clone(), client.clone(), user.clone(), done.clone());
            tokio::spawn(async move { sample(&cluster, &client, &user, &done, sessions).await })
        })
        .collect();

    let mut callers = Vec::new();
    for s in 0..sessions {
        for c in 0..CALLERS {
            let (cluster, client, user) = (cluster.clone(), client.clone(), user.clone());
            callers.push(tokio::spawn(async move {
                let mut acks = Vec::new();
                for t in 0..TURNS {
                    let member = &cluster.members[random_below(PROCESSES)];
                    let input = format!("s{s}-c{c}-t{t}");
                    let answer = turn(&client, member, &user, &format!("s{s}"), &input)
                        .await
                        .expect("the process answers");
                    assert_eq!(
                        answer.status, 200,
                        "{input} at {}: {}",
                        member.base, answer.body
                    );
                    let seq = answer.body["seq"].as_u64().expect("a seq");
                    acks.push((input, seq, answer.served_by != member.base));
                }
                (s, acks)
            }));
        }
    }
    let mut acked: HashMap<usize, Vec<(String, u64)>> = HashMap::new();
    let mut forwarded = 0;
    for caller in callers {
        let (s, acks) = caller.await.expect("the caller ran");
        for (input, seq, was_forwarded) in acks {
            forwarded += usize::from(was_forwarded);
            acked.entry(s).or_default().push((input, seq));
        }
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let (mut rounds, mut decisive, mut violations) = (0, 0, Vec::new());
    for sampler in samplers {
        let (r, d, v) = sampler.await.expect("the sampler ran");
        (rounds, decisive) = (rounds + r, decisive + d);
        violations.extend(v);
    }

    let store = cluster.store().await;
    for s in 0..sessions {
        let events = stored_events(store.as_ref(), &key(&user, &format!("s{s}"))).await;
        assert_dense(&events);
        let inputs: Vec<(u64, String)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::UserInput { text, .. } => Some((e.seq, text.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(inputs.len(), CALLERS * TURNS, "session s{s}: {inputs:?}");
        for (input, seq) in &acked[&s] {
            let at = inputs.iter().find(|(_, text)| text == input);
            assert_eq!(
                at.map(|(q, _)| q + 1),
                Some(*seq),
                "s{s}: {input} answered at {seq}"
            );
        }
        for c in 0..CALLERS {
            let own: Vec<&String> = inputs
                .iter()
                .map(|(_, text)| text)
                .filter(|text| text.starts_with(&format!("s{s}-c{c}-")))
                .collect();
            let sent: Vec<String> = (0..TURNS).map(|t| format!("s{s}-c{c}-t{t}")).collect();
            assert_eq!(
                own,
                sent.iter().collect::<Vec<_>>(),
                "s{s} caller {c} out of order"
            );
        }
    }
    let turns = sessions * CALLERS * TURNS;
    println!(
        "{turns} turns over {PROCESSES} processes in {elapsed:.2?} ({:.0} turns/s), {forwarded} \
         forwarded; sampler: {rounds} rounds, {decisive} decisive, {} with two holders",
        turns as f64 / elapsed.as_secs_f64(),
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "two processes held a session at once: {violations:?}"
    );
    assert!(
        decisive >= 10,
        "the sampler must have checked something: {decisive} decisive rounds"
    );
    assert!(
        forwarded > turns / 3,
        "most turns reach a non-owner first: {forwarded}"
    );
}
