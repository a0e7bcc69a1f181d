//! Property: when a server says its tool list changed (`notifications/tools/list_changed`),
//! its new list is read and the next turn offers the new tool to the model. The server is a
//! small one on the official Python SDK whose `flip` tool adds the tool `flipped`.

#![cfg(feature = "mcp")]

mod support;

use std::time::Duration;

use support::fake_openai::Reply;
use support::harness::*;
use support::mcp::{asks, connect, fixture, model_runtime};

#[tokio::test]
async fn a_tool_added_by_the_server_is_offered_in_the_next_turn() {
    let tools = connect(&fixture("fixture")).await;
    let names = |tools: &turnstile::McpTools| -> Vec<String> {
        tools.tool_names().into_iter().map(|(_, t)| t).collect()
    };
    assert!(!names(&tools).contains(&"flipped".to_owned()));
    let (fake, rt, _store) = model_runtime(
        &tools,
        vec![
            asks("flip", "{}"),
            Reply::text(&["flipped it"]),
            Reply::text(&["ok"]),
        ],
    )
    .await;
    let k = key("hu", "flip");
    within(rt.call(&k, "flip")).await.unwrap();
    eventually_ok(
        "the new list is read",
        Duration::from_millis(20),
        || async {
            names(&tools)
                .contains(&"flipped".to_owned())
                .then_some(())
                .ok_or_else(|| format!("{:?}", names(&tools)))
        },
    )
    .await;
    within(rt.call(&k, "what can you do now?")).await.unwrap();
    let offered: Vec<String> = fake.requests()[2]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.contains(&"flipped".to_owned()), "{offered:?}");
    rt.shutdown().await;
    tools.shutdown().await;
}
