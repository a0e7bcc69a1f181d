use serde_json::json;

use super::*;
use crate::state::Author;

fn event(seq: Seq, kind: EventKind) -> Event {
    Event::new(seq, Author::User, 0, kind)
}

fn input(seq: Seq, disposition: InputDisposition) -> Event {
    let text = format!("m{seq}");
    event(seq, EventKind::UserInput { text, disposition })
}

fn asked(seq: Seq, id: &str, disposition: InputDisposition) -> Event {
    let mut event = input(seq, disposition);
    event.request_id = Some(id.to_owned());
    event
}

fn output(seq: Seq, status: OutputStatus) -> Event {
    let kind = EventKind::AgentOutput {
        text: format!("out {seq}"),
        status,
        duration_ms: 9,
        usage: Some(Usage {
            input_tokens: 3,
            output_tokens: 4,
        }),
    };
    event(seq, kind)
}

fn failed(seq: Seq) -> Event {
    let kind = EventKind::TurnFailed {
        code: "model_timeout".into(),
        reason: "slow".into(),
        duration_ms: 5,
    };
    event(seq, kind)
}

fn call(seq: Seq, id: &str) -> Event {
    let kind = EventKind::ToolCall {
        call_id: id.to_owned(),
        name: "t".to_owned(),
        arguments: Box::new(json!({"q": seq})),
        server: Some("srv".into()),
    };
    event(seq, kind)
}

fn result(seq: Seq, id: &str, status: ToolStatus) -> Event {
    let kind = EventKind::ToolResult {
        call_id: id.to_owned(),
        result: Box::new(json!("r")),
        status,
        duration_ms: Some(2),
    };
    event(seq, kind)
}

fn with_timing(mut event: Event, starts: Vec<u32>) -> Event {
    event.timing = Some(Box::new(TurnTiming {
        agent_ms: 9,
        tool_start_ms: starts,
        ..TurnTiming::default()
    }));
    event
}

#[test]
fn a_final_turn_reads_its_message_calls_results_output_and_usage() {
    let events = vec![
        input(1, InputDisposition::Answered),
        call(2, "a"),
        call(3, "b"),
        result(4, "b", ToolStatus::Ok),
        result(5, "a", ToolStatus::Error),
        with_timing(output(6, OutputStatus::Final), vec![1, 2]),
        input(7, InputDisposition::Answered),
    ];
    let turn = turn_ending_at(&events, 6).unwrap();
    assert_eq!(turn.ending, Ending::Final);
    assert_eq!(turn.inputs, vec![1]);
    assert_eq!(turn.output, "out 6");
    assert_eq!(turn.usage.map(|u| u.output_tokens), Some(4));
    assert_eq!(turn.duration_ms, 9);
    assert_eq!(turn.timing.as_ref().map(|t| t.tool_start_ms.len()), Some(2));
    let calls: Vec<(&str, Option<ToolStatus>, Option<Seq>)> = turn
        .calls
        .iter()
        .map(|c| {
            let result = c.result.as_ref();
            (
                c.call_id.as_str(),
                result.map(|r| r.status),
                result.map(|r| r.seq),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("a", Some(ToolStatus::Error), Some(5)),
            ("b", Some(ToolStatus::Ok), Some(4))
        ]
    );
    assert_eq!(turn.calls[0].server.as_deref(), Some("srv"));
    assert_eq!(turn.open_calls().count(), 0);
}

#[test]
fn a_call_without_a_result_is_left_to_the_caller() {
    let events = vec![
        input(1, InputDisposition::Answered),
        call(2, "server"),
        result(3, "server", ToolStatus::Ok),
        call(4, "client"),
        output(5, OutputStatus::Final),
    ];
    let turn = turn_ending_at(&events, 5).unwrap();
    let open: Vec<&str> = turn.open_calls().map(|c| c.call_id.as_str()).collect();
    assert_eq!(open, vec!["client"]);
}

#[test]
fn interrupted_and_failed_turns_say_how_they_ended() {
    let reason = InterruptReason::Deadline;
    let events = vec![
        input(1, InputDisposition::Answered),
        output(2, OutputStatus::Interrupted(reason)),
        input(3, InputDisposition::Answered),
        failed(4),
    ];
    let cut = turn_ending_at(&events, 2).unwrap();
    assert_eq!(cut.ending, Ending::Interrupted(reason));
    assert_eq!(cut.output, "out 2");
    let failure = turn_ending_at(&events, 4).unwrap();
    assert_eq!(
        failure.ending,
        Ending::Failed {
            code: "model_timeout".into(),
            reason: "slow".into()
        }
    );
    assert_eq!(
        (failure.inputs, failure.output, failure.usage),
        (vec![3], String::new(), None)
    );
}

#[test]
fn merged_messages_are_the_turns_and_an_answered_one_before_them_is_not() {
    let events = vec![
        input(1, InputDisposition::Answered),
        input(2, InputDisposition::Merged),
        input(3, InputDisposition::Merged),
        output(4, OutputStatus::Final),
    ];
    assert_eq!(turn_ending_at(&events, 4).unwrap().inputs, vec![2, 3]);
}

#[test]
fn a_turn_read_without_its_start_has_its_last_calls_and_no_inputs() {
    // Three calls were made; only the last two are within what was read.
    let events = vec![
        call(10, "b"),
        call(11, "c"),
        output(12, OutputStatus::Final),
    ];
    let turn = turn_ending_at(&events, 12).unwrap();
    assert!(turn.inputs.is_empty());
    assert_eq!(turn.calls.len(), 2);
}

#[test]
fn an_event_that_ends_no_turn_is_named() {
    let events = vec![input(1, InputDisposition::Answered)];
    assert_eq!(turn_ending_at(&events, 1), Err(NotATurn::NotAnEnd));
    assert_eq!(turn_ending_at(&[], 1), Err(NotATurn::NoSuchEvent));
    assert_eq!(turn_ending_at(&events, 2), Err(NotATurn::NoSuchEvent));
    assert!(NotATurn::NotAnEnd
        .to_string()
        .contains("does not end a turn"));
}

#[test]
fn later_events_are_left_out_of_a_turn() {
    let events = vec![
        input(1, InputDisposition::Answered),
        output(2, OutputStatus::Final),
        call(3, "later"),
        output(4, OutputStatus::Final),
    ];
    let turn = turn_ending_at(&events, 2).unwrap();
    assert!(turn.calls.is_empty());
    assert_eq!(turn.inputs, vec![1]);
}

/// Each kind of message is answered as its caller was answered the first time: superseded by
/// its own event, merged ones by their turn's end (and marked merged but for the last), an
/// appended one by no turn, and one whose answer is not among the events read is unread.
#[test]
fn each_message_is_answered_by_the_event_that_answered_it() {
    let events = vec![
        asked(1, "a", InputDisposition::Answered),
        call(2, "c"),
        result(3, "c", ToolStatus::Ok),
        output(4, OutputStatus::Final),
        asked(5, "m1", InputDisposition::Merged),
        asked(6, "m2", InputDisposition::Merged),
        output(7, OutputStatus::Interrupted(InterruptReason::Requested)),
        asked(8, "s", InputDisposition::Superseded),
        input(9, InputDisposition::Answered),
        asked(10, "f", InputDisposition::Answered),
        failed(11),
        asked(12, "running", InputDisposition::Answered),
    ];
    let answer = |id| {
        let at = find_request(&events, id).expect("found");
        match answer_to(&events, at) {
            Answer::Turn { end, merged } => Some((end.seq, merged)),
            Answer::Superseded => Some((events[at].seq, false)),
            _ => None,
        }
    };
    assert_eq!(answer("a"), Some((4, false)));
    assert_eq!(answer("m1"), Some((7, true)));
    assert_eq!(answer("m2"), Some((7, false)));
    assert_eq!(answer("s"), Some((8, false)));
    assert_eq!(answer("f"), Some((11, false)));
    assert_eq!(find_request(&events, "unknown"), None);
    assert_eq!(answer_to(&events, 8), Answer::NoTurn, "appended");
    assert_eq!(answer_to(&events, 11), Answer::Unread, "still running");
    assert_eq!(answer_to(&events, 1), Answer::NoTurn, "not a message");
}

#[test]
fn a_request_id_names_its_message_not_the_entries_that_came_with_it() {
    let mut before = input(1, InputDisposition::Answered);
    before.request_id = Some("r".into());
    let mut reply = output(2, OutputStatus::Final);
    reply.request_id = Some("r".into());
    let events = vec![
        before,
        reply,
        asked(3, "r", InputDisposition::Answered),
        output(4, OutputStatus::Final),
    ];
    assert_eq!(find_request(&events, "r"), Some(2));
}

#[test]
fn a_failed_turn_marks_its_messages_and_not_superseded_ones() {
    let events = vec![
        input(1, InputDisposition::Answered),
        output(2, OutputStatus::Final),
        input(3, InputDisposition::Superseded),
        input(4, InputDisposition::Merged),
        input(5, InputDisposition::Merged),
        failed(6),
    ];
    assert_eq!(
        in_failed_turns(&events),
        vec![false, false, false, true, true, true]
    );
}

#[test]
fn a_turns_calls_get_their_starts_and_the_model_its_own_time() {
    // Three calls were made (starts 1, 2, 3 ms); the read holds the last two, which took 2 ms
    // each from 2 and 3: 3 ms of the agent's 9 were tools'.
    let events = vec![
        call(10, "b"),
        call(11, "c"),
        result(12, "b", ToolStatus::Ok),
        result(13, "c", ToolStatus::Ok),
        with_timing(output(14, OutputStatus::Final), vec![1, 2, 3]),
    ];
    let turn = turn_ending_at(&events, 14).unwrap();
    assert_eq!(turn.call_starts(), vec![Some(2), Some(3)]);
    assert_eq!(turn.model_ms(), Some(6));
    let untimed = turn_ending_at(
        &events[..4]
            .iter()
            .cloned()
            .chain([output(14, OutputStatus::Final)])
            .collect::<Vec<_>>(),
        14,
    )
    .unwrap();
    assert_eq!(untimed.call_starts(), vec![None, None]);
    assert_eq!(untimed.model_ms(), None);
}

#[test]
fn a_failed_turn_marks_the_entries_its_message_brought() {
    let mut brought = result(1, "c", ToolStatus::Ok);
    brought.request_id = Some("r fp".into());
    let mut message = input(2, InputDisposition::Answered);
    message.request_id = Some("r fp".into());
    let events = vec![call(0, "c"), brought, message, failed(3)];
    assert_eq!(in_failed_turns(&events), vec![false, true, true, true]);
}

/// A call stays open until a result answers it; a result a failed turn brought answers
/// nothing, so the call waits again.
#[test]
fn a_call_is_open_until_a_result_outside_a_failed_turn_answers_it() {
    let mut retried = result(4, "c2", ToolStatus::Ok);
    retried.request_id = Some("r1".into());
    let mut message = asked(5, "r1", InputDisposition::Answered);
    message.request_id = Some("r1".into());
    let events = vec![
        input(1, InputDisposition::Answered),
        call(2, "c1"),
        call(3, "c2"),
        retried,
        message,
        failed(6),
        result(7, "c1", ToolStatus::Ok),
    ];
    let (known, open) = open_calls(&events);
    assert_eq!(known, ["c1", "c2"]);
    assert_eq!(open, ["c2"]);
}
