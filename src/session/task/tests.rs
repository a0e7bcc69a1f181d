//! How a turn's end is settled and written as events.

use super::*;
use serde_json::json;

fn record_with_open_call() -> TurnRecord {
    let mut record = TurnRecord::default();
    record.tools = vec![
        ToolEntry::Call {
            call_id: "c1".into(),
            name: "search".into(),
            arguments: json!({}),
            server: None,
            started: tokio::time::Instant::now(),
        },
        ToolEntry::Result {
            call_id: "c1".into(),
            result: json!("ok"),
            ok: true,
            duration_ms: Some(4),
        },
        ToolEntry::Call {
            call_id: "c2".into(),
            name: "fetch".into(),
            arguments: json!({}),
            server: Some("web".into()),
            started: tokio::time::Instant::now(),
        },
    ];
    record.delta = [
        ("temp:x".to_owned(), json!(1)),
        ("kept".to_owned(), json!(2)),
    ]
    .into();
    record
}

#[test]
fn an_interrupted_turn_closes_open_tool_calls_and_keeps_order() {
    let write = TurnWrite {
        inputs: &["hi".to_owned()],
        record: record_with_open_call(),
        end: TurnEnd::Output(
            "par".into(),
            OutputStatus::Interrupted(InterruptReason::Requested),
        ),
        duration_ms: 3,
        superseded: &["later".to_owned()],
    };
    let events = turn_events(write, 10, 99);
    let seqs: Vec<Seq> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (10..17).collect::<Vec<_>>());
    assert!(matches!(
        &events[4].kind,
        EventKind::ToolResult { call_id, status: ToolStatus::Cancelled, .. } if call_id == "c2"
    ));
    assert!(matches!(events[5].kind, EventKind::AgentOutput { .. }));
    let delta = events[5].state_delta.as_ref().unwrap();
    assert!(
        !delta.contains_key("temp:x"),
        "temp: keys are never persisted"
    );
    assert!(matches!(
        events[6].kind,
        EventKind::UserInput {
            disposition: InputDisposition::Superseded,
            ..
        }
    ));
}

#[test]
fn a_failed_turn_keeps_its_input_and_reason_and_nothing_else() {
    let write = TurnWrite {
        inputs: &["boom".to_owned()],
        record: record_with_open_call(),
        end: TurnEnd::Failed {
            code: "model_timeout",
            reason: "silent".into(),
        },
        duration_ms: 7,
        superseded: &["a".to_owned()],
    };
    let events = turn_events(write, 1, 0);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0].text(), Some("boom"));
    assert!(matches!(
        &events[1].kind,
        EventKind::TurnFailed { code, reason, duration_ms: 7 }
            if code == "model_timeout" && reason == "silent"
    ));
    assert!(
        events[1].state_delta.is_none(),
        "a failed turn writes no state"
    );
    assert_eq!(events[2].text(), Some("a"));
}

#[test]
fn a_turn_without_a_permit_leaves_only_superseded_inputs() {
    let write = TurnWrite {
        inputs: &["never ran".to_owned()],
        record: TurnRecord::default(),
        end: TurnEnd::Nothing,
        duration_ms: 0,
        superseded: &["a".to_owned()],
    };
    let events = turn_events(write, 1, 0);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].text(), Some("a"));
}

fn settled(result: TaskResult, record: &TurnRecord, control: &TurnControl) -> TurnEnd {
    let key = SessionKey::new("u", "s").unwrap();
    let config = RuntimeConfig {
        max_reply_bytes: 4,
        ..RuntimeConfig::default()
    };
    settle(result, record, control, &key, &config).0
}

#[test]
fn an_interrupt_wins_over_what_the_agent_returned() {
    let control = TurnControl::with_token(Default::default());
    let done = interrupt_wins(TaskResult::Completed(String::new()), &control);
    assert!(
        matches!(done, TaskResult::Completed(_)),
        "not interrupted yet"
    );
    control.interrupt(InterruptReason::Requested);
    for result in [
        TaskResult::Completed(String::new()),
        TaskResult::Failed(AgentFailure::new(FailureKind::Agent, "saw the cancel")),
    ] {
        assert!(matches!(
            interrupt_wins(result, &control),
            TaskResult::Interrupted
        ));
    }
    let mut record = TurnRecord::default();
    record.partial = "abc".into();
    let end = settled(TaskResult::Interrupted, &record, &control);
    assert!(matches!(
        end,
        TurnEnd::Output(text, OutputStatus::Interrupted(InterruptReason::Requested))
            if text == "abc"
    ));
}

#[test]
fn a_reply_past_the_limit_is_cut_and_marked() {
    let control = TurnControl::with_token(Default::default());
    let record = TurnRecord::default();
    let end = settled(TaskResult::Completed("abcdef".into()), &record, &control);
    assert!(matches!(
        end,
        TurnEnd::Output(text, OutputStatus::Interrupted(InterruptReason::ReplyLimit))
            if text == "abcd"
    ));
    let mut record = TurnRecord::default();
    record.reply_limited = true;
    record.partial = "abcd".into();
    control.token.cancel();
    let end = settled(TaskResult::Interrupted, &record, &control);
    assert!(matches!(
        end,
        TurnEnd::Output(_, OutputStatus::Interrupted(InterruptReason::ReplyLimit))
    ));
}

#[test]
fn merged_inputs_are_marked() {
    let write = TurnWrite {
        inputs: &["a".to_owned(), "b".to_owned()],
        record: TurnRecord::default(),
        end: TurnEnd::Output("ab".into(), OutputStatus::Final),
        duration_ms: 0,
        superseded: &[],
    };
    let events = turn_events(write, 1, 0);
    assert!(events[..2].iter().all(|e| matches!(
        e.kind,
        EventKind::UserInput {
            disposition: InputDisposition::Merged,
            ..
        }
    )));
}
