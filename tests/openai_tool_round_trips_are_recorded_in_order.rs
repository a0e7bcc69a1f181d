//! Tools: the agent sends their definitions, runs the calls the model asks for (together when it
//! asks for several), sends the results back, and the history records input, calls, results and
//! the answer in that order. An unknown tool is an error result the model sees, not a failed
//! turn; a model that keeps calling tools is stopped at the round limit.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use tokio::sync::Barrier;
use turnstile::state::{EventKind, ToolStatus};
use turnstile::{Error, InMemoryStore, OpenAiAgent, Runtime, Store, Tool, ToolError};

/// Adds two numbers, after every other call of the same round has started: a barrier of the
/// round's size, so that calls run one after another never pass it.
struct Add(Arc<Barrier>);

#[async_trait]
impl Tool for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "Adds a and b."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
               "required": ["a", "b"]})
    }
    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.0.wait().await;
        let number = |k: &str| arguments[k].as_f64().ok_or(ToolError::from("need a and b"));
        Ok(json!(number("a")? + number("b")?))
    }
}

fn call(id: &str, name: &str, arguments: &str) -> (String, String, String) {
    (id.into(), name.into(), arguments.into())
}

fn runtime(agent: OpenAiAgent, store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent(agent)
        .store_arc(store)
        .build()
        .unwrap()
}

#[tokio::test]
async fn parallel_calls_and_results_are_recorded_between_input_and_answer() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![
            call("c1", "add", r#"{"a":2,"b":3}"#),
            call("c2", "add", r#"{"a":4,"b":5}"#),
        ]),
        Reply::text(&["5 and ", "9"]),
    ])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Add(Arc::new(Barrier::new(2))))
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent, store.clone());
    let k = key("tia", "tools");
    let outcome = within(rt.call(&k, "add 2+3 and 4+5")).await.unwrap();
    assert_eq!(outcome.output, "5 and 9");

    let kinds: Vec<EventKind> = stored_events(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(matches!(&kinds[0], EventKind::UserInput { text, .. } if text == "add 2+3 and 4+5"));
    let EventKind::ToolCall {
        call_id: first,
        name,
        arguments,
        server,
    } = &kinds[1]
    else {
        panic!("{kinds:?}")
    };
    assert_eq!(
        (name.as_str(), &**arguments, server),
        ("add", &json!({"a": 2, "b": 3}), &None),
        "a library tool comes from no MCP server"
    );
    let EventKind::ToolCall {
        call_id: second,
        arguments,
        ..
    } = &kinds[2]
    else {
        panic!("{kinds:?}")
    };
    assert_eq!(**arguments, json!({"a": 4, "b": 5}));
    let mut results: Vec<(String, Value)> = kinds[3..5]
        .iter()
        .map(|kind| match kind {
            EventKind::ToolResult {
                call_id,
                result,
                status: ToolStatus::Ok,
                duration_ms: Some(_),
            } => (call_id.clone(), (**result).clone()),
            other => panic!("expected an ok result with its duration, got {other:?}"),
        })
        .collect();
    // The results come as the calls finish: in either order, each with its call's id.
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![(first.clone(), json!(5.0)), (second.clone(), json!(9.0))];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(results, expected);
    assert!(matches!(&kinds[5], EventKind::AgentOutput { text, .. } if text == "5 and 9"));
    assert_eq!(kinds.len(), 6);

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["tools"][0]["function"]["name"], "add");
    let messages = requests[1]["messages"].as_array().unwrap();
    let ids: Vec<&str> = messages[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["call_t1", "call_t2"],
        "the turn's own ids, not the model's"
    );
    assert_eq!(
        (
            messages[2]["tool_call_id"].as_str(),
            messages[2]["content"].as_str()
        ),
        (Some("call_t1"), Some("5.0"))
    );
    assert_eq!(
        (
            messages[3]["tool_call_id"].as_str(),
            messages[3]["content"].as_str()
        ),
        (Some("call_t2"), Some("9.0"))
    );

    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(
        view.record.stats.input_tokens,
        5 + 10,
        "usage of both requests"
    );
    assert_eq!(view.record.stats.output_tokens, 3 + 2);

    // The next turn sends the recorded calls and results back as a valid tool exchange.
    within(rt.call(&k, "thanks")).await.unwrap();
    let messages = fake.requests()[2]["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "tool", "assistant", "user"]
    );
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_result_the_model_sees() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![call("x1", "teleport", "{}")]),
        Reply::text(&["I cannot teleport."]),
    ])
    .await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Add(Arc::new(Barrier::new(1))))
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent, store.clone());
    let k = key("tia", "unknown");
    let outcome = within(rt.call(&k, "beam me up")).await.unwrap();
    assert_eq!(outcome.output, "I cannot teleport.");
    let errored = stored_events(store.as_ref(), &k)
        .await
        .into_iter()
        .any(|e| {
            matches!(e.kind, EventKind::ToolResult { status: ToolStatus::Error, ref result, .. }
            if result.as_str().is_some_and(|r| r.contains("no tool named \"teleport\"")))
        });
    assert!(errored, "the failed call is recorded as an error result");
    let sent = &fake.requests()[1]["messages"][2];
    assert!(
        sent["content"].as_str().unwrap().starts_with("error:"),
        "{sent}"
    );
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_is_stopped_at_the_round_limit() {
    let again = || Reply::ToolCalls(vec![call("l", "add", r#"{"a":1,"b":1}"#)]);
    let fake = FakeOpenAi::start(vec![again(), again(), again()]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_tool(Add(Arc::new(Barrier::new(1))))
        .with_max_tool_rounds(2)
        .build()
        .unwrap();
    let rt = runtime(agent, Arc::new(InMemoryStore::new()));
    let err = within(rt.call(&key("tia", "loop"), "loop"))
        .await
        .unwrap_err();
    let Error::AgentFailed { message, .. } = err else {
        panic!("expected AgentFailed, got {err:?}")
    };
    assert!(message.contains("after 2 rounds"), "{message}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "no request past the limit");
    assert!(requests[0].get("tool_choice").is_none());
    assert_eq!(
        requests[1]["tool_choice"], "none",
        "the last round asks for words"
    );
}
