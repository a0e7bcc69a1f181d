//! Tools the caller runs itself (declared per turn in `openai.tools`): the model is offered them
//! beside the agent's own; a call of one ends the turn with the call open — the agent's own calls
//! of the same round still run — and the outcome names it. The caller's next message brings the
//! result (`CallOptions::preceding`, an empty message): the model then sees the call and its
//! result in order, and answers. Call ids are unique in the session, turn after turn. Every
//! per-turn setting the front door hands on (instructions, `tool_choice`, `parallel_tool_calls`,
//! `response_format`, sampling) reaches the model's request.

#![cfg(feature = "openai")]

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::agent::{
    INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, PARALLEL_TOOL_CALLS_ATTRIBUTE,
    RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE, TOOLS_ATTRIBUTE, TOOL_CHOICE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
use turnstile::state::{EventKind, ToolStatus};
use turnstile::{CallOptions, Entry, InMemoryStore, OpenAiAgent, Runtime, Store, Tool, ToolError};

/// The agent's own tool: the weather, always fine.
struct Weather;

#[async_trait]
impl Tool for Weather {
    fn name(&self) -> &str {
        "weather"
    }
    fn description(&self) -> &str {
        "The weather."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(json!("fine"))
    }
}

fn callers_tools() -> Value {
    json!([{"type": "function", "function": {"name": "add", "description": "Adds a and b.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"},
        "b": {"type": "number"}}}}}])
}

fn options(pairs: &[(&str, Value)]) -> CallOptions {
    let attributes: HashMap<String, Value> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    CallOptions::default().with_attributes(Arc::new(attributes))
}

#[tokio::test]
async fn a_callers_tool_ends_the_turn_and_its_result_continues_the_conversation() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![
            ("m1".into(), "weather".into(), "{}".into()),
            ("m2".into(), "add".into(), r#"{"a":2,"b":3}"#.into()),
        ]),
        Reply::text(&["it is fine and 5"]),
        Reply::ToolCalls(vec![("m3".into(), "add".into(), r#"{"a":1,"b":1}"#.into())]),
    ])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Weather)
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(agent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("cal", "tools");
    let first = options(&[
        (TOOLS_ATTRIBUTE, callers_tools()),
        (TOOL_CHOICE_ATTRIBUTE, json!("required")),
        (PARALLEL_TOOL_CALLS_ATTRIBUTE, json!(true)),
        (INSTRUCTIONS_ATTRIBUTE, json!("answer in words")),
        (TEMPERATURE_ATTRIBUTE, json!(0.25)),
        (TOP_P_ATTRIBUTE, json!(0.5)),
        (MAX_TOKENS_ATTRIBUTE, json!(99)),
        (
            RESPONSE_FORMAT_ATTRIBUTE,
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {}}}),
        ),
    ]);
    let outcome = within(rt.call_with(&k, "weather, and 2+3?", first))
        .await
        .unwrap();
    // The agent's own call ran; the caller's is open, and ended the turn.
    let calls: Vec<(&str, bool)> = outcome
        .calls
        .iter()
        .map(|c| (c.name.as_str(), c.result.is_some()))
        .collect();
    assert_eq!(calls, [("weather", true), ("add", false)], "{outcome:?}");
    assert_eq!(
        fake.requests().len(),
        1,
        "no second request before the result"
    );
    let asked = &fake.requests()[0];
    let offered: Vec<&str> = asked["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["weather", "add"]);
    assert_eq!(asked["tool_choice"], "required");
    assert_eq!(asked["parallel_tool_calls"], true);
    assert_eq!(asked["response_format"]["type"], "json_schema");
    assert_eq!(
        (asked["temperature"].as_f64(), asked["top_p"].as_f64()),
        (Some(0.25), Some(0.5))
    );
    assert_eq!(asked["max_tokens"], 99);
    assert_eq!(asked["messages"][0]["role"], "system");
    assert_eq!(asked["messages"][0]["content"], "answer in words");

    // The result comes with the next message; the model sees call, result, and answers.
    let call_id = outcome.calls[1].call_id.clone();
    let result = Entry::ToolResult {
        call_id: call_id.clone(),
        output: "5".into(),
    };
    let next = options(&[(TOOLS_ATTRIBUTE, callers_tools())]).with_preceding(vec![result]);
    let answered = within(rt.call_with(&k, "", next)).await.unwrap();
    assert_eq!(answered.output, "it is fine and 5");
    let sent = &fake.requests()[1]["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"], "{sent:#}");
    assert_eq!(sent[3]["content"], "5");
    assert!(sent[1]["tool_calls"][1]["id"] == sent[3]["tool_call_id"]);
    assert!(
        fake.requests()[1].get("tool_choice").is_none(),
        "only the first turn's"
    );

    // A third turn's call gets an id of its own.
    let third = within(rt.call_with(
        &k,
        "and 1+1?",
        options(&[(TOOLS_ATTRIBUTE, callers_tools())]),
    ))
    .await
    .unwrap();
    assert_ne!(third.calls[0].call_id, call_id);

    let log = stored_events(store.as_ref(), &k).await;
    let open_calls = log
        .iter()
        .filter(|e| {
            matches!(
                &e.kind,
                EventKind::ToolResult {
                    status: ToolStatus::Cancelled,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        open_calls, 0,
        "no call left to the caller is closed as cancelled"
    );
    let ids: Vec<&str> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "call ids repeat: {ids:?}");
}

#[tokio::test]
async fn a_callers_tool_named_like_the_agents_own_fails_the_turn_saying_so() {
    let fake = FakeOpenAi::start(vec![]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Weather)
        .build()
        .unwrap();
    let rt = Runtime::builder()
        .agent(agent)
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let taken = json!([{"type": "function", "function": {"name": "weather"}}]);
    let error = within(rt.call_with(
        &key("cal", "clash"),
        "hi",
        options(&[(TOOLS_ATTRIBUTE, taken)]),
    ))
    .await
    .unwrap_err();
    assert!(error.to_string().contains("weather"), "{error}");
    assert!(fake.requests().is_empty(), "nothing was sent to the model");
}
