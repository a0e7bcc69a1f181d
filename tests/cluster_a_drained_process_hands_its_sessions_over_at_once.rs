//! A planned move: `SIGTERM` drains a `serve --cluster` process, which releases its leases as
//! its sessions stop, so another process serves them with their whole history at once — well
//! before the (long) lease TTL would have freed them.

mod support;

use std::time::{Duration, Instant};

use support::cluster::{turn, Cluster, ClusterOptions};

const LEASE_TTL: Duration = Duration::from_secs(30);
const SESSIONS: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_process_hands_its_sessions_over_at_once() {
    let options = ClusterOptions {
        lease_ttl: LEASE_TTL.as_secs_f64(),
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start(2, options).await;
    let client = reqwest::Client::new();
    let user = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    for s in 0..SESSIONS {
        let answer = turn(
            &client,
            &cluster.members[0],
            &user,
            &format!("s{s}"),
            "before",
        )
        .await
        .expect("an answer");
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.served_by, cluster.members[0].base);
    }

    cluster.members[0].signal("TERM");
    let exited = cluster.members[0].wait_exit(Duration::from_secs(10)).await;
    assert!(exited, "the drained process exits 0");
    let moved_from = Instant::now();

    let survivor = &cluster.members[1];
    for s in 0..SESSIONS {
        let answer = turn(&client, survivor, &user, &format!("s{s}"), "after")
            .await
            .expect("an answer");
        assert_eq!(answer.status, 200, "s{s}: {}", answer.body);
        assert_eq!(answer.served_by, survivor.base);
        assert_eq!(answer.body["seq"], 4, "s{s} continues its history");
    }
    let took = moved_from.elapsed();
    println!(
        "{SESSIONS} sessions served elsewhere {took:?} after the drain (lease TTL {LEASE_TTL:?})"
    );
    assert!(
        took < LEASE_TTL / 4,
        "the sessions waited for their leases: {took:?}"
    );
}
