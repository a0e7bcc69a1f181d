//! A request for a session that another live process owns is forwarded to that owner and its
//! answer streamed back unchanged (JSON and server-sent events, chunk by chunk), over every
//! session-scoped route and channel messages; a forwarded request is never forwarded again; an
//! owner that cannot be reached, or an earlier run of this very process, is answered 503 with
//! `Retry-After` set to the lease TTL, and the session is served again once the lease expires.
//!
//! The "processes" are gateways on real loopback sockets, each over its own runtime with
//! ownership, sharing one memory store as processes share a Redis.

mod support;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::gateways::{Gateways, Member};
use support::harness::{eventually_ok, key, stored_inputs, within, GateAgent};
use support::http::{EventReader, ADMIN, ALICE};
use turnstile::http::{FORWARDED_HEADER, OWNER_HEADER, SERVED_BY_HEADER};
use turnstile::store::Claimant;
use turnstile::EchoAgent;

const LEASE_TTL: Duration = Duration::from_secs(2);

fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("this test binary installs the only recorder")
    })
}

/// `POST …/turns` as alice; returns status, served-by and body.
async fn turn(member: &Member, session: &str, input: &str) -> (StatusCode, String, Value) {
    let response = within(
        reqwest::Client::new()
            .post(member.url(&format!("/v1/sessions/alice/{session}/turns")))
            .bearer_auth(ALICE)
            .json(&json!({ "input": input }))
            .send(),
    )
    .await
    .expect("the gateway answers");
    answer(response).await
}

async fn answer(response: reqwest::Response) -> (StatusCode, String, Value) {
    let status = response.status();
    let served_by = header(&response, SERVED_BY_HEADER);
    let body = within(response.json::<Value>())
        .await
        .unwrap_or(Value::Null);
    (status, served_by, body)
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_route_sent_to_a_non_owner_is_answered_by_the_owner() {
    let metrics = recorder();
    let cluster = Gateways::start(3, Arc::new(EchoAgent), LEASE_TTL).await;
    let [a, b, c] = &cluster.members[..] else {
        unreachable!()
    };
    let client = reqwest::Client::new();

    let (status, served_by, body) = turn(a, "s", "one").await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    assert_eq!(body["seq"], 2);
    for (member, input, seq) in [(b, "two", 4), (c, "three", 6)] {
        let (status, served_by, body) = turn(member, "s", input).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(served_by, a.base, "the owner served it");
        assert_eq!(body["seq"], seq);
    }
    assert!(!b.runtime().is_live(&key("alice", "s")));
    assert!(!c.runtime().is_live(&key("alice", "s")));

    let read = client
        .get(c.url("/v1/sessions/alice/s"))
        .bearer_auth(ALICE)
        .send();
    let (status, served_by, body) = answer(within(read).await.expect("read")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    assert_eq!(body["live"], true, "the owner's live view: {body}");
    assert_eq!(body["owner"], a.base.as_str());
    assert!(body["owner_epoch"].as_u64().is_some());

    let interrupt = client
        .post(b.url("/v1/sessions/alice/s/interrupt"))
        .bearer_auth(ALICE)
        .send();
    let (status, served_by, body) = answer(within(interrupt).await.expect("interrupt")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    assert_eq!(body["interrupted"], false);

    let fork = client
        .post(c.url("/v1/sessions/alice/s/fork"))
        .bearer_auth(ALICE)
        .json(&json!({ "to": "copy" }))
        .send();
    let (status, served_by, body) = answer(within(fork).await.expect("fork")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    assert_eq!(body["events"], 6);

    let clear = client
        .post(b.url("/v1/sessions/alice/s/clear"))
        .bearer_auth(ALICE)
        .send();
    let (status, served_by, _) = answer(within(clear).await.expect("clear")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );

    let inputs: Vec<String> = stored_inputs(cluster.store.as_ref(), &key("alice", "s"))
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        inputs,
        ["one", "two", "three"],
        "each turn ran once, in order"
    );

    let delete = client
        .delete(c.url("/v1/sessions/alice/s"))
        .bearer_auth(ALICE)
        .send();
    let (status, served_by, body) = answer(within(delete).await.expect("delete")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    assert_eq!(body["deleted"], true);

    // A channel message goes where its chat's session lives.
    let message = |member: &Member, input: &str| {
        client
            .post(member.url("/v1/channels/slack/messages"))
            .bearer_auth(ADMIN)
            .json(&json!({ "chat": "C1", "user": "U1", "input": input }))
            .send()
    };
    let (status, first, _) = answer(within(message(b, "hi")).await.expect("post")).await;
    assert_eq!((status, first.as_str()), (StatusCode::OK, b.base.as_str()));
    let (status, second, body) = answer(within(message(c, "again")).await.expect("post")).await;
    assert_eq!((status, second.as_str()), (StatusCode::OK, b.base.as_str()));
    assert_eq!(body["seq"], 4);

    let text = metrics.render();
    let answered = text
        .lines()
        .find(|l| l.starts_with("turnstile_forwarded_total{outcome=\"answered\"}"));
    assert!(answered.is_some(), "forwards are counted:\n{text}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_passes_through_chunk_by_chunk() {
    let agent = Arc::new(GateAgent::default());
    let cluster = Gateways::start(2, agent.clone(), LEASE_TTL).await;
    let [a, b] = &cluster.members[..] else {
        unreachable!()
    };
    let (status, _, _) = turn(a, "stream", "warm up").await;
    assert_eq!(status, StatusCode::OK);

    let response = within(
        reqwest::Client::new()
            .post(b.url("/v1/sessions/alice/stream/turns"))
            .bearer_auth(ALICE)
            .header("accept", "text/event-stream")
            .json(&json!({ "input": "hold on" }))
            .send(),
    )
    .await
    .expect("the stream starts");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, SERVED_BY_HEADER), a.base);
    assert!(header(&response, "content-type").starts_with("text/event-stream"));
    let mut events = EventReader::new(response);
    // The turn is held at the gate: this chunk can only have come through before the end.
    let (name, data) = within(events.next()).await.expect("a first event");
    assert_eq!(
        (name.as_str(), &data),
        ("chunk", &json!({"text": "working on hold on"}))
    );
    assert_eq!(agent.entered.load(std::sync::atomic::Ordering::SeqCst), 1);

    agent.gate.add_permits(1);
    let (name, data) = within(events.next()).await.expect("the outcome");
    assert_eq!(name, "outcome");
    assert_eq!(data["output"], "done: hold on");
    assert!(within(events.next()).await.is_none(), "the stream ends");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_is_never_forwarded_again() {
    let cluster = Gateways::start(2, Arc::new(EchoAgent), LEASE_TTL).await;
    let [a, b] = &cluster.members[..] else {
        unreachable!()
    };
    let (status, _, _) = turn(a, "hop", "one").await;
    assert_eq!(status, StatusCode::OK);

    let forwarded = |member: &Member| {
        reqwest::Client::new()
            .post(member.url("/v1/sessions/alice/hop/turns"))
            .bearer_auth(ALICE)
            .header(FORWARDED_HEADER, "1")
            .json(&json!({ "input": "forwarded" }))
            .send()
    };
    let response = within(forwarded(b)).await.expect("b answers");
    assert_eq!(response.status(), StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(header(&response, OWNER_HEADER), a.base);
    let body: Value = within(response.json()).await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "owned_elsewhere");
    assert_eq!(body["error"]["owner"], a.base.as_str());

    let inputs = stored_inputs(cluster.store.as_ref(), &key("alice", "hop")).await;
    assert_eq!(inputs.len(), 1, "nothing ran for the refused request");

    // The owner itself serves a forwarded request.
    let (status, served_by, _) = answer(within(forwarded(a)).await.expect("a answers")).await;
    assert_eq!(
        (status, served_by.as_str()),
        (StatusCode::OK, a.base.as_str())
    );
    cluster.stop().await;
}

/// A port nobody listens on.
async fn dead_address() -> String {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a probe");
    let address = format!("http://{}", probe.local_addr().expect("address"));
    drop(probe);
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_owner_is_answered_503_until_its_lease_expires() {
    let cluster = Gateways::start(2, Arc::new(EchoAgent), LEASE_TTL).await;
    let a = &cluster.members[0];
    let k = key("alice", "orphan");
    let leases = cluster
        .store
        .leases()
        .expect("the memory store keeps leases");
    let dead = Claimant::new(dead_address().await);
    let planted = Instant::now();
    within(leases.acquire(&k, &dead, LEASE_TTL))
        .await
        .expect("the dead process's lease");

    let response = within(
        reqwest::Client::new()
            .post(a.url("/v1/sessions/alice/orphan/turns"))
            .bearer_auth(ALICE)
            .json(&json!({ "input": "anyone?" }))
            .send(),
    )
    .await
    .expect("a answers");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(header(&response, "retry-after"), "2", "the lease TTL");
    let body: Value = within(response.json()).await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "owner_unreachable");
    assert!(
        !body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("127.0.0.1"),
        "no internal address in a 5xx body: {body}"
    );

    // Once the dead owner's lease has expired, the next request takes the session.
    let served_by = eventually_ok(
        "the session to be served again",
        Duration::from_millis(50),
        || async {
            let (status, served_by, body) = turn(a, "orphan", "anyone?").await;
            if status == StatusCode::OK {
                return Ok(served_by);
            }
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            Err(body)
        },
    )
    .await;
    let waited = planted.elapsed();
    assert_eq!(served_by, a.base);
    assert!(
        waited <= LEASE_TTL + Duration::from_secs(1),
        "served again after {waited:?}"
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_run_at_the_same_address_is_waited_for_never_forwarded_to() {
    let cluster = Gateways::start(2, Arc::new(EchoAgent), LEASE_TTL).await;
    let [a, b] = &cluster.members[..] else {
        unreachable!()
    };
    let k = key("alice", "restarted");
    let leases = cluster
        .store
        .leases()
        .expect("the memory store keeps leases");
    let earlier = Claimant {
        address: a.base.clone(),
        instance: "an-earlier-run".into(),
    };
    within(leases.acquire(&k, &earlier, LEASE_TTL))
        .await
        .expect("the earlier run's lease");
    for member in [a, b] {
        let response = within(
            reqwest::Client::new()
                .post(member.url("/v1/sessions/alice/restarted/turns"))
                .bearer_auth(ALICE)
                .json(&json!({ "input": "hello" }))
                .send(),
        )
        .await
        .expect("an answer");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(header(&response, "retry-after"), "2");
        let body: Value = within(response.json()).await.expect("a JSON body");
        assert_eq!(body["error"]["code"], "owner_restarted", "{body}");
    }
    assert!(stored_inputs(cluster.store.as_ref(), &k).await.is_empty());
    cluster.stop().await;
}

/// An owner that no longer owns the session when the forwarded request reaches it answers 421;
/// the forwarder looks the owner up again and tries once more, reaching the new owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misdirected_forward_is_looked_up_again_and_retried_once() {
    use axum::http::StatusCode as Status;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let cluster = Gateways::start(2, Arc::new(EchoAgent), LEASE_TTL).await;
    let [a, b] = &cluster.members[..] else {
        unreachable!()
    };
    let k = key("alice", "moved");
    let leases = cluster
        .store
        .leases()
        .expect("the memory store keeps leases");

    // A stale owner: by the time a request reaches it, it has let the session go and `b` has
    // taken it; it answers as a turnstile process that does not own the session would.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let stale = Claimant::new(format!("http://{}", listener.local_addr().expect("addr")));
    let lease = match within(leases.acquire(&k, &stale, LEASE_TTL))
        .await
        .expect("the stale owner's lease")
    {
        turnstile::store::Claim::Granted(lease) => lease,
        held => panic!("expected a grant, got {held:?}"),
    };
    let hits = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (hits, leases, k) = (hits.clone(), leases.clone(), k.clone());
        let (b_runtime, b_base) = (b.runtime().clone(), b.base.clone());
        move || async move {
            hits.fetch_add(1, Ordering::SeqCst);
            leases.release(&k, &lease).await.expect("let it go");
            b_runtime.call(&k, "taken by b").await.expect("b takes it");
            let body =
                json!({"error": {"code": "owned_elsewhere", "message": "moved", "owner": b_base}});
            (
                Status::MISDIRECTED_REQUEST,
                [(OWNER_HEADER, b_base)],
                axum::Json(body),
            )
        }
    };
    let stub = tokio::spawn(async move {
        let app = axum::Router::new().fallback(handler);
        axum::serve(listener, app).await
    });

    let (status, served_by, body) = turn(a, "moved", "via a").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(served_by, b.base, "the new owner served it");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the stale owner was asked once"
    );
    let inputs: Vec<String> = stored_inputs(cluster.store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["taken by b", "via a"]);
    stub.abort();
    cluster.stop().await;
}
