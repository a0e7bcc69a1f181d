//! Property (contract 14, through a real `turnstile serve`): a model upstream that streams a
//! tool call with a huge index (`999999999999`, or one just past the bound), or a reply without
//! end, costs the process a bounded amount of memory. The client gets the documented answer
//! (`502 model_malformed`; `200` interrupted with reason `reply_limit` and the reply's first
//! `max_reply_bytes` bytes), the session stays usable, the history holds what the answer
//! promised and stays small, and the child's peak resident memory stays under
//! `PEAK_RSS_BOUND_KIB`.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use serde_json::{json, Value};
use support::fake_openai::{data, FakeOpenAi, Reply};
use support::harness::*;
use support::http::{ADMIN, ALICE};
use support::serve::{ModelServe, Serve};

/// The child's peak resident memory may not pass this. A debug build of `serve` starts at
/// about 32 MiB and peaked at 65–76 MiB in this test (the cut reply's 2 MiB held in a few
/// copies: the agent's, the turn's record, the event, the answer, the next request's history);
/// before the bounds, the huge index made it allocate 72 TB and the endless reply grew it by
/// hundreds of MB a second.
const PEAK_RSS_BOUND_KIB: u64 = 128 * 1024;

/// The default `max_reply_bytes`: what an endless reply is cut to.
const MAX_REPLY_BYTES: usize = 2 << 20;

fn tool_call_at(index: u64) -> Reply {
    let delta = json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": "x", "type": "function",
         "function": {"name": "clock", "arguments": "{}"}}]}}]});
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    Reply::Raw(vec![data(&delta), data(&finish), "data: [DONE]\n\n".into()])
}

async fn turn(serve: &Serve, session: &str, input: &str) -> (u16, Value) {
    let response = within(
        reqwest::Client::new()
            .post(serve.url(&format!("/v1/sessions/alice/{session}/turns")))
            .bearer_auth(ALICE)
            .json(&json!({"input": input}))
            .send(),
    )
    .await
    .expect("the server answers (it did not die)");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn events(serve: &Serve, session: &str) -> Vec<Value> {
    let page: Value = within(
        reqwest::Client::new()
            .get(serve.url(&format!("/v1/sessions/alice/{session}/events?limit=1000")))
            .bearer_auth(ADMIN)
            .send(),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    page["events"].as_array().cloned().unwrap_or_default()
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["kind"]["type"].as_str().unwrap_or("?"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_streams_are_refused_or_cut_and_memory_stays_bounded() {
    let fake = FakeOpenAi::start(vec![
        tool_call_at(999_999_999_999),
        Reply::text(&["still here"]),
        tool_call_at(100_000),
        Reply::Endless {
            delta: "z".repeat(1024),
        },
        Reply::text(&["and here"]),
    ])
    .await;
    let mut serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-test-key-for-the-memory-bound",
        log: "warn",
        extra: &["--request-timeout", "20"],
    });
    let idle = serve.peak_rss_kib();

    let (status, body) = turn(&serve, "huge", "what time is it?").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (502, &json!("model_malformed")),
        "{body}"
    );
    let (status, body) = turn(&serve, "huge", "hello?").await;
    assert_eq!(
        (status, &body["output"]),
        (200, &json!("still here")),
        "{body}"
    );
    assert_eq!(
        types(&events(&serve, "huge").await),
        ["user_input", "turn_failed", "user_input", "agent_output"]
    );

    let (status, body) = turn(&serve, "wide", "what time is it?").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (502, &json!("model_malformed")),
        "{body}"
    );
    let stored = events(&serve, "wide").await;
    assert_eq!(
        types(&stored),
        ["user_input", "turn_failed"],
        "no tool events were written"
    );
    assert_eq!(stored[1]["kind"]["code"], "model_malformed", "{stored:?}");
    // The bound it broke is named in the log, where operators read it.
    support::harness::eventually("the bound named in the log", || {
        serve.logs().contains("past the limit of 64 calls")
    })
    .await;

    let (status, body) = turn(&serve, "endless", "talk to me").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["outcome"], &body["reason"]),
        (&json!("interrupted"), &json!("reply_limit")),
        "{body}"
    );
    let output = body["output"].as_str().unwrap();
    assert_eq!(
        output.len(),
        MAX_REPLY_BYTES,
        "the reply is cut at the bound"
    );
    let stored = events(&serve, "endless").await;
    assert_eq!(types(&stored), ["user_input", "agent_output"]);
    assert_eq!(stored[1]["kind"]["status"]["reason"], "reply_limit");
    let (status, body) = turn(&serve, "endless", "and now?").await;
    assert_eq!(
        (status, &body["output"]),
        (200, &json!("and here")),
        "{body}"
    );

    assert!(serve.is_running());
    let peak = serve.peak_rss_kib();
    eprintln!("serve: {idle} KiB at start, peak {peak} KiB");
    assert!(
        peak < PEAK_RSS_BOUND_KIB,
        "peak RSS {peak} KiB is past the bound {PEAK_RSS_BOUND_KIB} KiB (idle: {idle} KiB)"
    );
}
