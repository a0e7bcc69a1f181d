//! A forwarded turn costs one more local HTTP exchange, not a new connection or a delayed
//! packet: sent one after another, turns to a non-owner take about as long as turns to the
//! owner plus one hop (the bound below would catch a connection per request or Nagle's
//! 40 ms delay). Prints both latency distributions.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::gateways::{Gateways, Member};
use support::harness::within;
use support::http::ALICE;
use turnstile::EchoAgent;

const TURNS: usize = 300;

async fn timed_turn(client: &reqwest::Client, member: &Member, input: &str) -> Duration {
    let started = Instant::now();
    let response = within(
        client
            .post(member.url("/v1/sessions/alice/hop/turns"))
            .bearer_auth(ALICE)
            .json(&json!({ "input": input }))
            .send(),
    )
    .await
    .expect("an answer");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    within(response.bytes()).await.expect("the body");
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_turn_costs_one_local_hop() {
    let cluster = Gateways::start(2, Arc::new(EchoAgent), Duration::from_secs(10)).await;
    let [owner, other] = &cluster.members[..] else {
        unreachable!()
    };
    let client = reqwest::Client::new();
    timed_turn(&client, owner, "warm up").await;
    timed_turn(&client, other, "warm up the forwarder's connection").await;
    let (mut local, mut forwarded) = (Vec::new(), Vec::new());
    for i in 0..TURNS {
        local.push(timed_turn(&client, owner, &format!("l{i}")).await);
        forwarded.push(timed_turn(&client, other, &format!("f{i}")).await);
    }
    local.sort();
    forwarded.sort();
    let (l50, f50) = (percentile(&local, 0.5), percentile(&forwarded, 0.5));
    println!(
        "{TURNS} sequential turns each: local p50 {l50:?} p99 {:?}; forwarded p50 {f50:?} p99 {:?}",
        percentile(&local, 0.99),
        percentile(&forwarded, 0.99)
    );
    assert!(
        f50 < l50 * 3 + Duration::from_millis(20),
        "a forwarded turn costs far more than one hop: {f50:?} against {l50:?}"
    );
    cluster.stop().await;
}
