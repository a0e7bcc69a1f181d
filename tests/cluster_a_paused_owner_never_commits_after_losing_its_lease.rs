//! An owner paused (`SIGSTOP`) past its lease while a turn runs and another waits: a second
//! process takes the session and serves turns; when the first resumes (`SIGCONT`), both of its
//! callers get an error (never 200), nothing it meant to write is stored, and its later
//! requests for the session reach the new owner.

mod support;

use std::time::{Duration, Instant};

use support::cluster::{turn, view, Cluster, ClusterOptions, Member, View};
use support::harness::{eventually_ok, key, stored_inputs, TIMEOUT};

const LEASE_TTL: Duration = Duration::from_secs(1);

/// The pause between two looks at a process: a pace, not what the test waits for.
const PACE: Duration = Duration::from_millis(10);

/// Polls `member`'s own view of the session until `ready` holds, failing after `TIMEOUT`.
async fn until(
    client: &reqwest::Client,
    member: &Member,
    user: &str,
    what: &str,
    ready: impl Fn(&View) -> bool,
) {
    eventually_ok(what, PACE, || async {
        let seen = view(client, member, user, "s").await;
        if ready(&seen) {
            Ok(())
        } else {
            Err(seen)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_never_commits_after_losing_its_lease() {
    let options = ClusterOptions {
        lease_ttl: LEASE_TTL.as_secs_f64(),
        // Long enough that the turns are still running when the owner is paused.
        latency_ms: 1_000,
        chunks: 1,
        request_timeout: 30.0,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start(3, options).await;
    let [old, new, third] = &cluster.members[..] else {
        unreachable!()
    };
    let client = reqwest::Client::new();
    let user = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);

    let warm = turn(&client, old, &user, "s", "warm")
        .await
        .expect("an answer");
    assert_eq!(
        (warm.status, warm.served_by.as_str()),
        (200, old.base.as_str())
    );

    // One turn running and one waiting at the old owner, then the pause.
    let late = |input: &'static str| {
        let (client, base, user) = (client.clone(), old.base.clone(), user.clone());
        tokio::spawn(async move { turn(&client, &Member::at(&base), &user, "s", input).await })
    };
    let running = late("late-1");
    until(&client, old, &user, "the first late turn", |v| {
        v.pending >= 1
    })
    .await;
    let waiting = late("late-2");
    until(&client, old, &user, "the second late turn", |v| {
        v.pending >= 2
    })
    .await;
    old.signal("STOP");
    let paused_at = Instant::now();

    // Once the old lease expires, another process takes the session and serves turns.
    until(&client, new, &user, "the lease to expire", |v| {
        v.status != 421
    })
    .await;
    let expired_after = paused_at.elapsed();
    for (member, input) in [(new, "new-1"), (third, "new-2")] {
        let answer = turn(&client, member, &user, "s", input)
            .await
            .expect("an answer");
        assert_eq!(answer.status, 200, "{input}: {}", answer.body);
        assert_eq!(
            answer.served_by, new.base,
            "{input} is served by the new owner"
        );
    }
    old.signal("CONT");

    for (name, call) in [("late-1", running), ("late-2", waiting)] {
        let answer = tokio::time::timeout(TIMEOUT, call)
            .await
            .expect("the paused owner answers once resumed")
            .expect("the caller ran")
            .expect("an HTTP answer");
        let code = answer.body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        println!("{name}: {} {code}", answer.status);
        assert_ne!(
            answer.status, 200,
            "{name} was acknowledged: {}",
            answer.body
        );
        assert!(
            matches!(code.as_str(), "not_owner" | "fenced"),
            "{name}: {} {}",
            answer.status,
            answer.body
        );
    }

    let store = cluster.store().await;
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &key(&user, "s"))
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        inputs,
        ["warm", "new-1", "new-2"],
        "nothing of the paused owner's is stored"
    );

    // The resumed process sends the session's requests to its new owner.
    let answer = eventually_ok(
        "the resumed process to forward the session's turns",
        Duration::from_millis(20),
        || async {
            let answer = turn(&client, old, &user, "s", "via old")
                .await
                .expect("an answer");
            if answer.status == 200 {
                Ok(answer)
            } else {
                Err(answer.body)
            }
        },
    )
    .await;
    assert_eq!(answer.served_by, new.base);
    println!("paused past a {LEASE_TTL:?} lease; taken over {expired_after:?} after the pause");
}
