//! Property: interrupting a turn while an MCP tool runs (the reference server's long-running
//! operation) tells the server `notifications/cancelled` for that very request, and the turn
//! is recorded interrupted with the call closed as `cancelled`.

#![cfg(feature = "mcp")]

mod support;

use support::harness::*;
use support::mcp::{asks, connect, everything, model_runtime, tap_lines, tapped};
use turnstile::state::{EventKind, InterruptReason, OutputStatus, ToolStatus};
use turnstile::OutcomeKind;

#[tokio::test]
async fn an_interrupt_during_a_long_operation_cancels_it_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tap.log");
    let tools = connect(&tapped("everything", &log, &everything(), &["stdio"])).await;
    let (_fake, rt, store) = model_runtime(
        &tools,
        vec![asks(
            "trigger-long-running-operation",
            r#"{"duration":60,"steps":60}"#,
        )],
    )
    .await;
    let k = key("cy", "long");
    let call = {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call(&k, "run the long one").await })
    };
    let request_id = eventually_ok("the server got the call", PACE, || async {
        tap_lines(&log)
            .into_iter()
            .find(|(to_server, m)| *to_server && m["method"] == "tools/call")
            .map(|(_, m)| m["id"].clone())
            .ok_or("no tools/call yet")
    })
    .await;
    assert!(rt.interrupt(&k), "the turn was running");
    let outcome = within(call).await.unwrap().unwrap();
    assert_eq!(
        outcome.kind,
        OutcomeKind::Interrupted(InterruptReason::Requested)
    );
    eventually_ok("the server got notifications/cancelled", PACE, || async {
        tap_lines(&log)
            .into_iter()
            .find(|(to_server, m)| {
                *to_server
                    && m["method"] == "notifications/cancelled"
                    && m["params"]["requestId"] == request_id
            })
            .ok_or("no cancellation yet")
    })
    .await;

    let events = stored_events(store.as_ref(), &k).await;
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::ToolResult {
            status: ToolStatus::Cancelled,
            ..
        }
    )));
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::AgentOutput {
            status: OutputStatus::Interrupted(InterruptReason::Requested),
            ..
        }
    )));
    rt.shutdown().await;
    tools.shutdown().await;
}

/// How often the tap's log is read while waiting.
const PACE: std::time::Duration = std::time::Duration::from_millis(10);
