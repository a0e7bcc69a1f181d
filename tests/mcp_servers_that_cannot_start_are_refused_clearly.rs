//! Property: at start, what cannot work is refused with a message naming the server and what
//! to do — a command that does not exist, an HTTP server that does not answer, a server that
//! exits at once, two servers with one name, two servers offering one tool, an MCP tool named
//! like one of the agent's own — unless the server is optional, when start goes on without it.

#![cfg(feature = "mcp")]

mod support;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::harness::*;
use support::mcp::everything;
use turnstile::{McpServer, McpTools, OpenAiAgent, Tool, ToolError};

async fn refused(servers: Vec<McpServer>) -> String {
    let mut builder = McpTools::builder();
    for server in servers {
        builder = builder.server(server);
    }
    within(builder.connect()).await.unwrap_err().to_string()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

#[tokio::test]
async fn unreachable_servers_fail_start_saying_which_and_why() {
    let missing = refused(vec![McpServer::stdio(
        "nope",
        "/nonexistent/mcp-server",
        Vec::<String>::new(),
    )])
    .await;
    assert!(
        missing.contains("cannot start MCP server \"nope\""),
        "{missing}"
    );
    assert!(missing.contains("cannot run"), "{missing}");
    assert!(missing.contains("--mcp-optional"), "{missing}");

    let url = format!("http://127.0.0.1:{}/mcp", closed_port());
    let http = refused(vec![McpServer::http("down", &url)]).await;
    assert!(http.contains("cannot start MCP server \"down\""), "{http}");

    let exits = refused(vec![McpServer::stdio(
        "false",
        "false",
        Vec::<String>::new(),
    )])
    .await;
    assert!(
        exits.contains("cannot start MCP server \"false\""),
        "{exits}"
    );
}

#[tokio::test]
async fn an_optional_server_that_is_down_does_not_stop_the_others() {
    let tools = within(
        McpTools::builder()
            .server(McpServer::stdio(
                "nope",
                "/nonexistent/mcp-server",
                Vec::<String>::new(),
            ))
            .server(McpServer::stdio(
                "everything",
                everything().display().to_string(),
                ["stdio"],
            ))
            .with_allowed_tools(["echo"])
            .optional(true)
            .connect(),
    )
    .await
    .unwrap();
    assert_eq!(
        tools.tool_names(),
        [("everything".to_owned(), "echo".to_owned())]
    );
    tools.shutdown().await;
}

#[tokio::test]
async fn clashing_names_are_refused() {
    let everything = everything().display().to_string();
    let twice = refused(vec![
        McpServer::stdio("a", &everything, ["stdio"]),
        McpServer::stdio("a", &everything, ["stdio"]),
    ])
    .await;
    assert!(twice.contains("two MCP servers are named \"a\""), "{twice}");

    let same_tools = refused(vec![
        McpServer::stdio("a", &everything, ["stdio"]),
        McpServer::stdio("b", &everything, ["stdio"]),
    ])
    .await;
    assert!(
        same_tools.contains("is offered by MCP servers \"a\" and \"b\""),
        "{same_tools}"
    );
    assert!(same_tools.contains("--mcp-allow"), "{same_tools}");
}

/// A library tool named like the reference server's `echo`.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Mine."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Ok(json!("mine"))
    }
}

#[tokio::test]
async fn an_mcp_tool_named_like_a_library_tool_is_refused() {
    let tools = within(
        McpTools::builder()
            .server(McpServer::stdio(
                "everything",
                everything().display().to_string(),
                ["stdio"],
            ))
            .connect(),
    )
    .await
    .unwrap();
    let error = OpenAiAgent::builder("http://127.0.0.1:9/v1", "m")
        .without_api_key()
        .with_tool(Echo)
        .with_mcp(tools.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        error
            .contains("\"echo\" is offered both by with_tool and by the MCP server \"everything\""),
        "{error}"
    );
    tools.shutdown().await;
}

#[test]
fn serve_exits_with_the_reason_before_it_listens() {
    let down = support::cli::turnstile(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--agent",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--mcp",
        "nope=stdio:/nonexistent/mcp-server",
    ]);
    assert!(!down.success);
    assert!(!down.stdout.contains("listening"), "{}", down.stdout);
    assert!(
        down.stderr.contains("cannot start MCP server \"nope\"")
            && down.stderr.contains("--mcp-optional"),
        "{}",
        down.stderr
    );
    let mock = support::cli::turnstile(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--mcp",
        "stdio:/nonexistent/mcp-server",
    ]);
    assert!(!mock.success);
    assert!(
        mock.stderr.contains("needs --agent openai"),
        "{}",
        mock.stderr
    );
    let header = support::cli::turnstile(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        "memory",
        "--agent",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--mcp",
        "docs=http://127.0.0.1:9/mcp",
        "--mcp-header",
        "Authorization: env:TURNSTILE_TEST_SURELY_UNSET_VARIABLE",
    ]);
    assert!(!header.success);
    assert!(
        header
            .stderr
            .contains("TURNSTILE_TEST_SURELY_UNSET_VARIABLE is not set"),
        "{}",
        header.stderr
    );
}
