//! Property: in every request the agent sends, each tool call's id is unique and each tool
//! message answers a call of the assistant message before it — also when the model's own ids
//! repeat across rounds and turns and match the ids history calls are renamed to
//! (`call_<seq>`); and a tool call that failed reads `error: …` when the history is sent again,
//! as it did the first time.

#![cfg(feature = "openai")]

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::{InMemoryStore, OpenAiAgent, Runtime, Tool, ToolError};

/// Answers `{"ok": true}`, or fails when asked with `{"fail": true}`.
struct Probe;

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "Probes."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        match arguments["fail"].as_bool() {
            Some(true) => Err("the probe broke".into()),
            _ => Ok(json!({"ok": true})),
        }
    }
}

fn calls(ids: &[(&str, &str)]) -> Reply {
    Reply::ToolCalls(
        ids.iter()
            .map(|(id, arguments)| ((*id).into(), "probe".into(), (*arguments).into()))
            .collect(),
    )
}

/// Checks one request's messages: unique call ids, every tool message answering a call of the
/// assistant message before it.
fn check(request: &Value) {
    let messages = request["messages"].as_array().unwrap();
    let mut seen = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        if let Some(calls) = message["tool_calls"].as_array() {
            open.clear();
            for call in calls {
                let id = call["id"].as_str().unwrap().to_owned();
                assert!(seen.insert(id.clone()), "call id {id} twice in {request}");
                open.push(id);
            }
        }
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap();
            assert!(
                open.iter().any(|o| o == id),
                "tool message {id} answers no call before it in {request}"
            );
        }
    }
}

#[tokio::test]
async fn call_ids_never_repeat_in_a_request_and_failures_stay_marked() {
    // Turn 1's calls land at seqs 2 and 3, so the history sends them back as `call_2` and
    // `call_3`: exactly the ids the model uses again in turn 2, twice.
    let fake = FakeOpenAi::start(vec![
        calls(&[("call_2", "{}"), ("call_3", "{}")]),
        Reply::text(&["probed"]),
        calls(&[("call_2", r#"{"fail":true}"#), ("call_3", "{}")]),
        calls(&[("call_2", "{}")]),
        Reply::text(&["one broke"]),
        Reply::text(&["noted"]),
    ])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Probe)
        .build()
        .unwrap();
    let rt = Runtime::builder()
        .agent(agent)
        .store_arc(Arc::new(InMemoryStore::new()))
        .build()
        .unwrap();
    let k = key("uma", "ids");
    for input in ["probe twice", "probe again", "what broke?"] {
        within(rt.call(&k, input)).await.unwrap();
    }
    let requests = fake.requests();
    assert_eq!(requests.len(), 6);
    for request in &requests {
        check(request);
    }
    let resent = requests[5]["messages"].as_array().unwrap();
    let failed: Vec<&str> = resent
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.contains("the probe broke"))
        .collect();
    assert_eq!(failed, ["error: the probe broke"], "{resent:?}");
}
