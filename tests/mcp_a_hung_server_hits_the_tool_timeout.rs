//! Property: a server that stops answering (the reference server, frozen with SIGSTOP) holds a
//! tool call for the tool timeout and no longer: the model then gets an error result naming
//! the timeout, the call is cancelled on the server (`notifications/cancelled` is sent), and
//! the turn goes on to its answer.

#![cfg(feature = "mcp")]

mod support;

use std::time::{Duration, Instant};

use support::fake_openai::Reply;
use support::harness::*;
use support::mcp::{
    everything, model_runtime, signal, tap_lines, tap_pid, tapped, tool_messages, KillOnDrop,
};
use turnstile::state::{EventKind, ToolStatus};
use turnstile::{McpServer, McpTools};

/// The tool timeout of the test.
const TOOL_TIMEOUT: Duration = Duration::from_millis(500);

#[tokio::test]
async fn a_frozen_server_times_out_and_the_call_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tap.log");
    let server: McpServer = tapped("everything", &log, &everything(), &["stdio"])
        .parse()
        .unwrap();
    let tools = within(
        McpTools::builder()
            .server(server)
            .with_call_timeout(TOOL_TIMEOUT)
            .connect(),
    )
    .await
    .unwrap();
    let pid = tap_pid(&log).expect("the tap wrote the pid");
    let _cleanup = KillOnDrop(pid);
    signal(pid, "STOP");
    let (fake, rt, store) = model_runtime(
        &tools,
        vec![
            support::mcp::asks("echo", r#"{"message":"anyone?"}"#),
            Reply::text(&["no answer"]),
        ],
    )
    .await;
    let k = key("ed", "hang");
    let started = Instant::now();
    let outcome = within(rt.call(&k, "echo")).await.unwrap();
    let took = started.elapsed();
    assert_eq!(outcome.output, "no answer", "the turn went on");
    assert!(
        took >= TOOL_TIMEOUT && took < TOOL_TIMEOUT * 6,
        "the call waited {took:?}, the timeout is {TOOL_TIMEOUT:?}"
    );
    let answers = tool_messages(&fake.requests()[1]);
    assert!(
        answers[0].1.starts_with("error: ") && answers[0].1.contains("the tool timeout"),
        "{answers:?}"
    );
    let call_id = tap_lines(&log)
        .into_iter()
        .find(|(to_server, m)| *to_server && m["method"] == "tools/call")
        .map(|(_, m)| m["id"].clone())
        .expect("the call was sent");
    eventually("the cancellation was sent", || {
        tap_lines(&log).iter().any(|(to_server, m)| {
            *to_server
                && m["method"] == "notifications/cancelled"
                && m["params"]["requestId"] == call_id
        })
    })
    .await;
    let statuses: Vec<ToolStatus> = stored_events(store.as_ref(), &k)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult { status, .. } => Some(status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [ToolStatus::Error]);
    rt.shutdown().await;
    tools.shutdown().await;
}
