//! Property: a stdio MCP server runs with a cleared environment — the variables programs need
//! (PATH, HOME…) and those passed on purpose — so the model's API key in turnstile's
//! environment never reaches it. Checked with the reference server's `get-env` tool, which
//! returns the server's whole environment.

#![cfg(feature = "mcp")]

mod support;

use support::fake_openai::Reply;
use support::harness::*;
use support::mcp::{asks, everything, model_runtime, tool_messages};
use turnstile::{McpServer, McpTools};

/// The key, set in this test process's environment as a deployment sets it.
const KEY: &str = "sk-test-never-leaves-turnstile-42";

#[tokio::test]
async fn the_servers_environment_holds_what_it_was_given_and_no_key() {
    std::env::set_var("OPENAI_API_KEY", KEY);
    let server = McpServer::stdio("everything", everything().display().to_string(), ["stdio"])
        .with_env("GIVEN_ON_PURPOSE", "yes");
    let tools = within(
        McpTools::builder()
            .server(server)
            .with_allowed_tools(["get-env"])
            .connect(),
    )
    .await
    .unwrap();
    let (fake, rt, _store) =
        model_runtime(&tools, vec![asks("get-env", "{}"), Reply::text(&["seen"])]).await;
    within(rt.call(&key("gil", "env"), "show me your environment"))
        .await
        .unwrap();
    let env = &tool_messages(&fake.requests()[1])[0].1;
    assert!(env.contains("\"PATH\""), "{env}");
    assert!(env.contains("\"GIVEN_ON_PURPOSE\""), "{env}");
    assert!(!env.contains(KEY), "the key reached the server: {env}");
    assert!(!env.contains("OPENAI_API_KEY"), "{env}");
    rt.shutdown().await;
    tools.shutdown().await;
}
