//! Every turn's last event carries where its time went (`timing`: the wait in the session's
//! queue, loading the session, the agent's run, the model's first chunk, each tool call's
//! start), and `GET /v1/sessions/{u}/{s}/turns/{seq}` gives the turn with its inputs, tools and
//! the agent's own time. Time is paused, so every figure is exact.

#![cfg(feature = "http")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;
use serde_json::{json, Value};
use support::harness::eventually;
use support::http::{code, get, post, TestGateway, ADMIN, ALICE, BOB};
use turnstile::{Agent, AgentError, AgentFailure, FailureKind, TurnContext};

/// "slow": 40 ms to its first chunk, then a 25 ms tool call, then 10 ms more. "fail": fails
/// after 5 ms. Anything else: answered at once.
#[derive(Default)]
struct PhasedAgent {
    entered: AtomicUsize,
}

#[async_trait]
impl Agent for PhasedAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let sleep = |ms| tokio::time::sleep(Duration::from_millis(ms));
        match turn.input().as_str() {
            "slow" => {
                sleep(40).await;
                turn.emit("looking ").await;
                let call = turn.tool_call("lookup", json!({"q": "x"}));
                sleep(25).await;
                turn.tool_result(&call, Ok(json!("found")));
                sleep(10).await;
                turn.emit("done").await;
                Ok("looking done".into())
            }
            "fail" => {
                sleep(5).await;
                Err(AgentFailure::new(FailureKind::ModelUnavailable, "model down").into())
            }
            other => {
                turn.emit(other).await;
                Ok(other.to_owned())
            }
        }
    }
}

const TURNS: &str = "/v1/sessions/alice/s1/turns";

async fn turn_of(gateway: &TestGateway, token: &str, seq: &Value) -> (StatusCode, Value) {
    gateway.send(get(&format!("{TURNS}/{seq}"), token)).await
}

#[tokio::test(start_paused = true)]
async fn each_turn_says_where_its_time_went() {
    let agent = Arc::new(PhasedAgent::default());
    let builder = turnstile::Runtime::builder().agent_arc(agent.clone());
    let gateway = Arc::new(TestGateway::with(builder, Default::default()));

    // "slow" wakes the session; "quick" is taken in while it runs and waits behind it.
    let slow = tokio::spawn({
        let gateway = gateway.clone();
        async move {
            gateway
                .send(post(TURNS, ALICE, json!({"input": "slow"})))
                .await
        }
    });
    eventually("the slow turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let (status, quick) = gateway
        .send(post(TURNS, ALICE, json!({"input": "quick"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{quick}");
    let (status, slow) = slow.await.expect("the slow caller");
    assert_eq!(status, StatusCode::OK, "{slow}");

    let (status, turn) = turn_of(&gateway, ALICE, &slow["seq"]).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    assert_eq!(turn["status"], "final");
    assert_eq!(turn["inputs"], json!([1]));
    let timing = &turn["timing"];
    assert_eq!(timing["load_ms"], 0, "the message woke the session: {turn}");
    assert_eq!(timing["agent_ms"], 75, "{turn}");
    assert_eq!(timing["first_chunk_ms"], 40, "{turn}");
    assert_eq!(timing["tool_start_ms"], json!([40]), "{turn}");
    assert_eq!(turn["duration_ms"], 75, "{turn}");
    assert_eq!(
        turn["model_ms"], 50,
        "the agent's 75 ms less the tool's 25: {turn}"
    );
    let tools = turn["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "{turn}");
    assert_eq!(
        (&tools[0]["name"], &tools[0]["status"]),
        (&json!("lookup"), &json!("ok"))
    );
    assert_eq!(
        (&tools[0]["start_ms"], &tools[0]["duration_ms"]),
        (&json!(40), &json!(25))
    );

    let (status, turn) = turn_of(&gateway, ALICE, &quick["seq"]).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    let timing = &turn["timing"];
    // It was sent once the slow turn was seen running (the check looks every millisecond or so).
    let queued = timing["queued_ms"].as_u64().expect("queued_ms");
    assert!(
        (70..=75).contains(&queued),
        "it waited for the slow turn: {turn}"
    );
    assert!(
        timing.get("load_ms").is_none(),
        "the session was live: {turn}"
    );
    assert_eq!(
        (&timing["agent_ms"], &timing["first_chunk_ms"]),
        (&json!(0), &json!(0))
    );
    assert_eq!(turn["tools"], json!([]));
    assert_eq!(turn["model_ms"], 0);
    let input = quick["seq"].as_u64().expect("a seq") - 1;
    assert_eq!(turn["inputs"], json!([input]));

    // A failed turn carries its timing too.
    let (status, failed) = gateway
        .send(post(TURNS, ALICE, json!({"input": "fail"})))
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{failed}");
    let end = quick["seq"].as_u64().expect("a seq") + 2;
    let (status, turn) = turn_of(&gateway, ALICE, &json!(end)).await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    assert_eq!(
        (&turn["status"], &turn["reason"]),
        (&json!("failed"), &json!("model_unavailable"))
    );
    assert_eq!(turn["timing"]["agent_ms"], 5, "{turn}");
    assert!(turn["timing"].get("first_chunk_ms").is_none(), "{turn}");

    // The stored events carry the same record.
    let (_, page) = gateway
        .send(get("/v1/sessions/alice/s1/events", ADMIN))
        .await;
    let timed: Vec<&Value> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e.get("timing").is_some())
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(timed, vec![&slow["seq"], &quick["seq"], &json!(end)]);
}

#[tokio::test(start_paused = true)]
async fn a_seq_that_ends_no_turn_is_refused_clearly() {
    let gateway = TestGateway::new(PhasedAgent::default());
    let (status, answer) = gateway
        .send(post(TURNS, ALICE, json!({"input": "hello"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    for (seq, expected, says) in [
        ("1", StatusCode::NOT_FOUND, "does not end a turn"),
        ("3", StatusCode::NOT_FOUND, "no such event"),
        ("0", StatusCode::BAD_REQUEST, "between 1 and"),
        ("x", StatusCode::BAD_REQUEST, ""),
    ] {
        let (status, body) = gateway.send(get(&format!("{TURNS}/{seq}"), ALICE)).await;
        assert_eq!(status, expected, "{seq}: {body}");
        assert!(!code(&body).is_empty(), "a typed error: {body}");
        assert!(body.to_string().contains(says), "{seq}: {body}");
    }
    let (status, body) = gateway.send(get(&format!("{TURNS}/2"), BOB)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another user's turn: {body}");
    let (status, body) = gateway.send(get(&format!("{TURNS}/2"), ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The record is part of the stored event: the file store keeps it, and a new runtime on the
/// same folder answers the same turn with it.
#[tokio::test]
async fn the_record_is_kept_by_the_file_store_across_a_restart() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let open = || {
        let store = turnstile::backend::FileStore::open(dir.path()).expect("a file store");
        let builder = turnstile::Runtime::builder().agent(PhasedAgent::default());
        TestGateway::with_store(builder, Arc::new(store), Default::default())
    };
    let first = open();
    let (status, answer) = first
        .send(post(TURNS, ALICE, json!({"input": "slow"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, before) = turn_of(&first, ALICE, &answer["seq"]).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    // Real time here: at least what the agent slept.
    assert!(
        before["timing"]["agent_ms"].as_u64() >= Some(75),
        "{before}"
    );
    assert!(
        before["timing"]["first_chunk_ms"].as_u64() >= Some(40),
        "{before}"
    );
    first.runtime().shutdown().await;
    drop(first);

    let second = open();
    let (status, after) = turn_of(&second, ALICE, &answer["seq"]).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after, before, "the same turn, read back from the folder");
}
