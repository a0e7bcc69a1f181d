//! Graceful shutdown: once the shutdown signal fires (SIGTERM for the binary), /readyz answers
//! 503 and new turns 503 while the turn in flight completes, is answered and is durable; then
//! the server stops (the process exits 0). Nothing acknowledged is lost.

#![cfg(feature = "http")]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::harness::*;
use support::http::*;
use support::stores::temp_file_store;
use turnstile::backend::FileStore;
use turnstile::state::{EventKind, OutputStatus};
use turnstile::{http::HttpConfig, Runtime, SessionKey, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_in_flight_completes_while_the_server_drains() {
    // Property: after the signal the server still answers (readyz 503, new turns 503
    // `draining`), the running turn's client gets 200 completed, `serve` reports a clean drain,
    // and the turn is in the file store.
    let (dir, store) = temp_file_store();
    let agent = Arc::new(GateAgent::default());
    let builder = Runtime::builder().agent_arc(agent.clone());
    let gw = TestGateway::with_store(builder, Arc::new(store), HttpConfig::default());
    let mut served = Served::start(gw.gateway.clone()).await;
    let client = reqwest::Client::new();
    let in_flight = tokio::spawn(
        client_post(
            &client,
            &served,
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "hold me"}),
        )
        .send(),
    );
    eventually("the turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    served.begin_shutdown();
    eventually("draining begins", || gw.runtime().is_draining()).await;
    let ready = client.get(served.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let refused = client_post(
        &client,
        &served,
        "/v1/sessions/alice/t/turns",
        ALICE,
        json!({"input": "late"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["error"]["code"],
        "draining"
    );

    agent.gate.add_permits(1);
    let answered = within(in_flight).await.unwrap().unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    let body: Value = answered.json().await.unwrap();
    assert_eq!(body["outcome"], "completed");
    let report = served.stop().await;
    assert!(report.clean && report.left == 0, "{report:?}");

    drop(gw);
    let reopened = FileStore::open(dir.path()).expect("the runtime released the store");
    let key = SessionKey::new("alice", "s").unwrap();
    assert_eq!(final_outputs(&reopened, &key).await, ["done: hold me"]);
}

async fn final_outputs(store: &dyn Store, key: &SessionKey) -> Vec<String> {
    stored_events(store, key)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AgentOutput {
                text,
                status: OutputStatus::Final,
                ..
            } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_drains_on_sigterm_and_exits_0() {
    // Property: `turnstile serve` receiving SIGTERM with a streamed turn in flight finishes
    // that turn (its client gets the outcome), exits 0, and the turn is in the store.
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ADMIN} admin\n")).unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["serve", "--addr", "127.0.0.1:0", "--agent", "mock"])
        .args(["--latency", "4000", "--chunks", "8"])
        .arg("--store")
        .arg(format!("file:{}", data.display()))
        .arg("--tokens")
        .arg(&tokens)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start turnstile serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let base = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the first line");
        line.trim()
            .rsplit(' ')
            .next()
            .expect("the line ends with the URL")
            .to_owned()
    });
    let base = within(base).await.unwrap();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let client = reqwest::Client::new();
    let response = client
        .post(format!("{base}/v1/sessions/alice/s/turns"))
        .bearer_auth(ADMIN)
        .header("accept", "text/event-stream")
        .json(&json!({"input": "before the signal"}))
        .send()
        .await
        .unwrap();
    let mut events = EventReader::new(response);
    let (name, _) = within(events.next()).await.expect("a first chunk");
    assert_eq!(name, "chunk", "the turn is in flight");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    // The drain has begun once /readyz says so; the turn must still be streaming then, or this
    // test would not show that the drain waited for it.
    within(async {
        loop {
            let ready = client.get(format!("{base}/readyz")).send().await;
            if ready.expect("the server answers while it drains").status()
                == StatusCode::SERVICE_UNAVAILABLE
            {
                break;
            }
        }
    })
    .await;
    let mut chunks_while_draining = 0;
    let mut last = None;
    while let Some(event) = within(events.next()).await {
        chunks_while_draining += usize::from(event.0 == "chunk");
        last = Some(event);
    }
    assert!(
        chunks_while_draining > 0,
        "the turn was over before the drain began; nothing was shown"
    );
    let (name, outcome) = last.expect("events after the signal");
    assert_eq!(name, "outcome");
    assert_eq!(outcome["outcome"], "completed", "{outcome}");

    let status = within(tokio::task::spawn_blocking(move || child.wait()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let store = FileStore::open(&data).expect("the process released the store");
    let key = SessionKey::new("alice", "s").unwrap();
    let outputs = final_outputs(&store, &key).await;
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0], outcome["output"].as_str().unwrap());
}
