//! Property: the tools real MCP servers list (the reference `server-everything` and
//! `mcp-server-time`, over stdio) are offered to the model with their JSON schemas; a call the
//! model asks for runs `tools/call` on the server, the next request carries the result as a
//! `tool` message answering that call's id, and the history records each call with its server
//! and each result with its duration.

#![cfg(feature = "mcp")]

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use support::mcp::{everything, time};
use turnstile::state::{Event, EventKind, ToolStatus};
use turnstile::{InMemoryStore, McpServer, McpTools, OpenAiAgent, Runtime, Store};

fn call(id: &str, name: &str, arguments: &str) -> (String, String, String) {
    (id.into(), name.into(), arguments.into())
}

/// Runs one turn in which the model calls `calls`, then answers "done"; returns the requests
/// the model server got and the session's events.
async fn turn_calling(
    tools: &McpTools,
    calls: Vec<(String, String, String)>,
) -> (Vec<Value>, Vec<Event>) {
    let fake = FakeOpenAi::start(vec![Reply::ToolCalls(calls), Reply::text(&["done"])]).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_mcp(tools.clone())
        .build()
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(agent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    let k = key("ada", "mcp");
    let outcome = within(rt.call(&k, "use the tools")).await.unwrap();
    assert_eq!(outcome.output, "done");
    rt.shutdown().await;
    (fake.requests(), stored_events(store.as_ref(), &k).await)
}

/// The `tool` messages of a request, as `(tool_call_id, content)`.
fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The offered tool named `name` in a request.
fn offered<'a>(request: &'a Value, name: &str) -> &'a Value {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not offered: {}", request["tools"]))
}

#[tokio::test]
async fn everything_servers_echo_and_sum_answer_the_model() {
    let server: McpServer = format!("everything=stdio:{}", everything().display())
        .parse()
        .unwrap();
    let tools = within(
        McpTools::builder()
            .server(server)
            .with_allowed_tools(["echo", "get-sum"])
            .connect(),
    )
    .await
    .unwrap();
    assert_eq!(
        tools.tool_names(),
        [
            ("everything".to_owned(), "echo".to_owned()),
            ("everything".to_owned(), "get-sum".to_owned())
        ],
        "--mcp-allow keeps the named tools only"
    );
    // An agent of one's own calls them through the `Tool` trait.
    let echo = tools.tools().into_iter().next().unwrap();
    assert_eq!((echo.name(), echo.server()), ("echo", Some("everything")));
    assert_eq!(
        within(echo.call(json!({"message": "direct"})))
            .await
            .unwrap(),
        json!("Echo: direct")
    );
    let (requests, events) = turn_calling(
        &tools,
        vec![
            call("m1", "echo", r#"{"message":"hi there"}"#),
            call("m2", "get-sum", r#"{"a":2,"b":3}"#),
        ],
    )
    .await;
    tools.shutdown().await;

    let echo = offered(&requests[0], "echo");
    assert_eq!(
        echo["function"]["description"],
        "Echoes back the input string"
    );
    assert_eq!(
        echo["function"]["parameters"]["properties"]["message"]["type"], "string",
        "the server's own schema is offered"
    );
    let mut answers = tool_messages(&requests[1]);
    answers.sort();
    assert_eq!(
        answers,
        [
            ("call_t1".to_owned(), "Echo: hi there".to_owned()),
            ("call_t2".to_owned(), "The sum of 2 and 3 is 5.".to_owned())
        ]
    );
    let calls: Vec<(&str, Option<&str>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall { name, server, .. } => Some((name.as_str(), server.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("echo", Some("everything")),
            ("get-sum", Some("everything"))
        ]
    );
    let results: Vec<(&Value, ToolStatus, Option<u64>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult {
                result,
                status,
                duration_ms,
                ..
            } => Some((&**result, *status, *duration_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    for (result, status, duration) in results {
        assert_eq!(status, ToolStatus::Ok, "{result}");
        assert!(duration.is_some(), "each result has its duration");
    }
}

#[tokio::test]
async fn the_time_servers_tool_answers_the_model() {
    let server: McpServer = format!("time=stdio:{}", time().display()).parse().unwrap();
    let tools = within(McpTools::builder().server(server).connect())
        .await
        .unwrap();
    let names: Vec<String> = tools.tool_names().into_iter().map(|(_, t)| t).collect();
    assert!(names.contains(&"get_current_time".to_owned()), "{names:?}");
    let (requests, events) = turn_calling(
        &tools,
        vec![call("t", "get_current_time", r#"{"timezone":"Etc/UTC"}"#)],
    )
    .await;
    tools.shutdown().await;

    let required = &offered(&requests[0], "get_current_time")["function"]["parameters"]["required"];
    assert_eq!(required, &json!(["timezone"]));
    let answers = tool_messages(&requests[1]);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].0, "call_t1");
    assert!(answers[0].1.contains("\"timezone\""), "{}", answers[0].1);
    assert!(answers[0].1.contains("Etc/UTC"), "{}", answers[0].1);
    assert!(events.iter().any(|e| matches!(&e.kind,
        EventKind::ToolCall { server: Some(s), .. } if &**s == "time")));
}
