//! Property: when `serve` drains (SIGTERM), it stops its stdio MCP servers and reaps them before
//! it exits — also a server that no longer reacts to its input closing (frozen with SIGSTOP,
//! which would otherwise outlive `serve`) — and its log says so.

#![cfg(all(feature = "mcp", feature = "http"))]

mod support;

use std::time::Duration;

use support::fake_openai::FakeOpenAi;
use support::mcp::{everything, exists, signal, KillOnDrop};
use support::serve::{ModelServe, Serve};

#[tokio::test]
async fn a_frozen_stdio_server_is_killed_and_reaped_on_drain() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let spec = format!("everything=stdio:{} stdio", everything().display());
    let mut serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-unused-key-0000",
        log: "warn,turnstile::mcp=info",
        extra: &["--mcp", &spec],
    });
    let children = serve.children();
    assert_eq!(children.len(), 1, "one server process: {children:?}");
    let server = children[0];
    let _cleanup = KillOnDrop(server);
    signal(server, "STOP");

    let status = serve.terminate(Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    assert!(!exists(server), "the MCP server's process {server} is gone");
    let logs = serve.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("MCP server stopped") && l.contains("everything")),
        "{logs}"
    );
}
