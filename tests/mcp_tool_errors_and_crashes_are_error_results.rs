//! Property: a tool that fails (an `isError` result from the reference server) and a server
//! that dies in the middle of a call both give the model an error result it reads, recorded as
//! `error`; the turn goes on to its answer, and a crashed server is started again for the
//! next turn.

#![cfg(feature = "mcp")]

mod support;

use std::time::Duration;

use support::fake_openai::Reply;
use support::harness::*;
use support::mcp::{
    asks, connect, everything, model_runtime, signal, tap_lines, tap_pid, tapped, tool_messages,
};
use turnstile::state::{EventKind, ToolStatus};

/// How often the tap's log is read while waiting.
const PACE: Duration = Duration::from_millis(10);
/// The pause between turns that try whether the restarted server answers, and how many the
/// model's script has room for (far more than the restart's half-second back-off takes).
const RETRY_PACE: Duration = Duration::from_millis(100);
const RETRIES: usize = 60;

#[tokio::test]
async fn a_failing_tool_is_an_error_result_and_the_turn_answers() {
    let tools = connect(&format!(
        "everything=stdio:{} stdio",
        everything().display()
    ))
    .await;
    let (fake, rt, store) = model_runtime(
        &tools,
        vec![
            asks("get-sum", r#"{"a":"two","b":3}"#),
            Reply::text(&["could not add"]),
        ],
    )
    .await;
    let k = key("di", "errors");
    let outcome = within(rt.call(&k, "add two and 3")).await.unwrap();
    assert_eq!(outcome.output, "could not add", "the turn went on");
    let answers = tool_messages(&fake.requests()[1]);
    assert_eq!(answers.len(), 1);
    assert!(answers[0].1.starts_with("error: "), "{answers:?}");
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

#[tokio::test]
async fn a_server_killed_mid_call_is_an_error_result_and_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("tap.log");
    let tools = connect(&tapped("everything", &log, &everything(), &["stdio"])).await;
    let mut script = vec![
        asks(
            "trigger-long-running-operation",
            r#"{"duration":60,"steps":60}"#,
        ),
        Reply::text(&["it broke"]),
    ];
    // Turns that ask for `echo` until the new process answers one (each asks, then answers).
    for _ in 0..RETRIES {
        script.push(asks("echo", r#"{"message":"back"}"#));
        script.push(Reply::text(&["echoed"]));
    }
    let (fake, rt, store) = model_runtime(&tools, script).await;
    let k = key("di", "crash");
    let call = {
        let (rt, k) = (rt.clone(), k.clone());
        tokio::spawn(async move { rt.call(&k, "run the long one").await })
    };
    eventually_ok("the server got the call", PACE, || async {
        tap_lines(&log)
            .into_iter()
            .find(|(to_server, m)| *to_server && m["method"] == "tools/call")
            .ok_or("no tools/call yet")
    })
    .await;
    signal(tap_pid(&log).expect("the tap wrote the pid"), "KILL");
    let outcome = within(call).await.unwrap().unwrap();
    assert_eq!(outcome.output, "it broke", "the turn went on");
    let answers = tool_messages(&fake.requests()[1]);
    assert!(
        answers[0].1.starts_with("error: ") && answers[0].1.contains("stopped during the call"),
        "{answers:?}"
    );

    // Started again: a second process answered `initialize` (and the list) through the tap.
    eventually_ok("the server was started again", PACE, || async {
        let lists = tap_lines(&log)
            .into_iter()
            .filter(|(to_server, m)| !to_server && m["result"]["tools"].is_array())
            .count();
        (lists >= 2).then_some(()).ok_or("not listed again yet")
    })
    .await;
    // It takes calls once its listing is read: until then a call is an error result.
    eventually_ok("a call reaches the new process", RETRY_PACE, || async {
        let outcome = rt.call(&k, "echo back").await.map_err(|e| e.to_string())?;
        assert_eq!(outcome.output, "echoed");
        let requests = fake.requests();
        let last = tool_messages(requests.last().ok_or("no request")?);
        match last.first() {
            Some((_, text)) if text == "Echo: back" => Ok(()),
            other => Err(format!("{other:?}")),
        }
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
    assert_eq!(statuses.first(), Some(&ToolStatus::Error), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&ToolStatus::Ok), "{statuses:?}");
    rt.shutdown().await;
    tools.shutdown().await;
}
