//! Property: a Streamable HTTP MCP server (the reference `server-everything`, run with its
//! `streamableHttp` transport) is used like a stdio one: its tools are offered, a call runs on
//! it and the next request carries the result answering the call's id.

#![cfg(feature = "mcp")]

mod support;

use support::fake_openai::Reply;
use support::harness::*;
use support::mcp::{asks, model_runtime, tool_messages, HttpEverything};
use turnstile::state::EventKind;
use turnstile::{McpServer, McpTools};

#[tokio::test]
async fn an_http_servers_echo_answers_the_model() {
    let http = HttpEverything::start();
    let server: McpServer = format!("web={}", http.url).parse().unwrap();
    let tools = within(
        McpTools::builder()
            .server(server.with_header("X-Team", "blue"))
            .with_allowed_tools(["echo"])
            .connect(),
    )
    .await
    .unwrap();
    assert_eq!(tools.tool_names(), [("web".to_owned(), "echo".to_owned())]);
    let (fake, rt, store) = model_runtime(
        &tools,
        vec![
            asks("echo", r#"{"message":"over http"}"#),
            Reply::text(&["done"]),
        ],
    )
    .await;
    let k = key("fa", "http");
    let outcome = within(rt.call(&k, "echo it")).await.unwrap();
    assert_eq!(outcome.output, "done");
    assert_eq!(
        tool_messages(&fake.requests()[1]),
        [("call_t1".to_owned(), "Echo: over http".to_owned())]
    );
    assert!(stored_events(store.as_ref(), &k)
        .await
        .iter()
        .any(|e| matches!(
            &e.kind,
            EventKind::ToolCall { server: Some(s), .. } if &**s == "web"
        )));
    rt.shutdown().await;
    tools.shutdown().await;
}
