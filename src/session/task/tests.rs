//! How a turn's end is settled and written as events.

use super::*;
use serde_json::json;

fn said(text: &str) -> Message<'_> {
    Message {
        preceding: &[],
        text,
        request_id: None,
    }
}

fn record_with_open_call() -> TurnRecord {
    let tools = vec![
        ToolEntry::Call {
            call_id: "c1".into(),
            name: "search".into(),
            arguments: json!({}),
            server: None,
            started: tokio::time::Instant::now(),
            for_caller: false,
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
            for_caller: false,
        },
    ];
    let delta = [
        ("temp:x".to_owned(), json!(1)),
        ("kept".to_owned(), json!(2)),
    ]
    .into();
    TurnRecord {
        tools,
        delta,
        ..TurnRecord::default()
    }
}

#[test]
fn an_interrupted_turn_closes_open_tool_calls_and_keeps_order() {
    let write = TurnWrite {
        messages: &[said("hi")],
        record: record_with_open_call(),
        end: TurnEnd::Output(
            "par".into(),
            OutputStatus::Interrupted(InterruptReason::Requested),
        ),
        duration_ms: 3,
        superseded: &[said("later")],
    };
    let events = turn_events(write, 10, 99).events;
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
        messages: &[said("boom")],
        record: record_with_open_call(),
        end: TurnEnd::Failed {
            code: "model_timeout",
            reason: "silent".into(),
        },
        duration_ms: 7,
        superseded: &[said("a")],
    };
    let events = turn_events(write, 1, 0).events;
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
        messages: &[said("never ran")],
        record: TurnRecord::default(),
        end: TurnEnd::Nothing,
        duration_ms: 0,
        superseded: &[said("a")],
    };
    let events = turn_events(write, 1, 0).events;
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
    let record = TurnRecord {
        partial: "abc".into(),
        ..TurnRecord::default()
    };
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
    let record = TurnRecord {
        reply_limited: true,
        partial: "abcd".into(),
        ..TurnRecord::default()
    };
    control.token.cancel();
    let end = settled(TaskResult::Interrupted, &record, &control);
    assert!(matches!(
        end,
        TurnEnd::Output(_, OutputStatus::Interrupted(InterruptReason::ReplyLimit))
    ));
}

#[test]
fn an_ending_the_agent_reported_is_the_turns() {
    use crate::state::IncompleteReason;
    let control = TurnControl::with_token(Default::default());
    let record = TurnRecord {
        ending: Some(AgentEnding::Incomplete(IncompleteReason::MaxTokens)),
        ..TurnRecord::default()
    };
    let end = settled(TaskResult::Completed("ab".into()), &record, &control);
    assert!(matches!(
        end,
        TurnEnd::Output(text, OutputStatus::Incomplete(IncompleteReason::MaxTokens))
            if text == "ab"
    ));
    let refused = |text: &str| TurnRecord {
        ending: Some(AgentEnding::Refused(text.into())),
        ..TurnRecord::default()
    };
    let end = settled(
        TaskResult::Completed(String::new()),
        &refused("no."),
        &control,
    );
    assert!(matches!(end, TurnEnd::Output(text, OutputStatus::Refused) if text == "no."));
    // Cut at the limit (4 bytes here), a refusal is still a refusal.
    let end = settled(
        TaskResult::Completed(String::new()),
        &refused("no way"),
        &control,
    );
    assert!(matches!(end, TurnEnd::Output(text, OutputStatus::Refused) if text == "no w"));
    control.interrupt(InterruptReason::Requested);
    let end = settled(TaskResult::Interrupted, &refused("no."), &control);
    assert!(matches!(
        end,
        TurnEnd::Output(_, OutputStatus::Interrupted(InterruptReason::Requested))
    ));
}

#[test]
fn merged_inputs_are_marked() {
    let write = TurnWrite {
        messages: &[said("a"), said("b")],
        record: TurnRecord::default(),
        end: TurnEnd::Output("ab".into(), OutputStatus::Final),
        duration_ms: 0,
        superseded: &[],
    };
    let events = turn_events(write, 1, 0).events;
    assert!(events[..2].iter().all(|e| matches!(
        e.kind,
        EventKind::UserInput {
            disposition: InputDisposition::Merged,
            ..
        }
    )));
}

/// A message's entries come before it, all carrying its request id; a superseded message is
/// written with its own; a call left to the caller stays open.
#[test]
fn brought_entries_precede_their_message_with_its_request_id() {
    let brought = [
        Entry::User("earlier".into()),
        Entry::Agent("reply".into()),
        Entry::ToolResult {
            call_id: "call_x".into(),
            output: "42".into(),
        },
    ];
    let record = TurnRecord {
        tools: vec![ToolEntry::Call {
            call_id: "call_c".into(),
            name: "client_tool".into(),
            arguments: json!({}),
            server: None,
            started: tokio::time::Instant::now(),
            for_caller: true,
        }],
        ..TurnRecord::default()
    };
    let later = [Entry::User("also said".into())];
    let write = TurnWrite {
        messages: &[Message {
            preceding: &brought,
            text: "now",
            request_id: Some("r1".into()),
        }],
        record,
        end: TurnEnd::Output(String::new(), OutputStatus::Final),
        duration_ms: 1,
        superseded: &[Message {
            preceding: &later,
            text: "newer",
            request_id: Some("r2".into()),
        }],
    };
    let written = turn_events(write, 5, 0);
    let shown: Vec<(Seq, String, Option<&str>)> = written
        .events
        .iter()
        .map(|e| {
            let kind = serde_json::to_value(&e.kind).unwrap()["type"].to_string();
            (
                e.seq,
                kind.trim_matches('"').to_owned(),
                e.request_id.as_deref(),
            )
        })
        .collect();
    let shown: Vec<(Seq, &str, Option<&str>)> = shown
        .iter()
        .map(|(seq, kind, id)| (*seq, kind.as_str(), *id))
        .collect();
    assert_eq!(
        shown,
        vec![
            (5, "user_input", Some("r1")),
            (6, "agent_output", Some("r1")),
            (7, "tool_result", Some("r1")),
            (8, "user_input", Some("r1")),
            (9, "tool_call", None),
            (10, "agent_output", None),
            (11, "user_input", Some("r2")),
            (12, "user_input", Some("r2")),
        ],
        "no cancelled result closes the caller's call"
    );
    assert_eq!(written.turn_len, 6);
    assert_eq!(written.superseded_seqs, vec![12]);
}

/// Merged messages' entries all come first, then the messages; a turn that never ran (no
/// permit) writes neither its messages nor their entries.
#[test]
fn merged_messages_entries_come_first_and_a_turn_that_never_ran_writes_none() {
    let first = [Entry::User("before a".into())];
    let second = [Entry::Agent("before b".into())];
    let messages = [
        Message {
            preceding: &first,
            text: "a",
            request_id: Some("ra".into()),
        },
        Message {
            preceding: &second,
            text: "b",
            request_id: Some("rb".into()),
        },
    ];
    let write = |end| TurnWrite {
        messages: &messages,
        record: TurnRecord::default(),
        end,
        duration_ms: 0,
        superseded: &[],
    };
    let written = turn_events(
        write(TurnEnd::Output("ab".into(), OutputStatus::Final)),
        1,
        0,
    );
    let shown: Vec<(Option<&str>, Option<&str>)> = written
        .events
        .iter()
        .map(|e| (e.text(), e.request_id.as_deref()))
        .collect();
    assert_eq!(
        shown,
        [
            (Some("before a"), Some("ra")),
            (Some("before b"), Some("rb")),
            (Some("a"), Some("ra")),
            (Some("b"), Some("rb")),
            (Some("ab"), None),
        ]
    );
    assert!(turn_events(write(TurnEnd::Nothing), 1, 0).events.is_empty());
}
