use super::*;
use crate::state::{Author, InputDisposition, OutputStatus, ToolStatus};
use serde_json::json;

fn event(seq: u64, kind: EventKind) -> Event {
    Event::new(seq, Author::Agent, 0, kind)
}

fn input(seq: u64, text: &str) -> Event {
    event(
        seq,
        EventKind::UserInput {
            text: text.into(),
            disposition: InputDisposition::Answered,
        },
    )
}

fn call(seq: u64, id: &str) -> Event {
    event(
        seq,
        EventKind::ToolCall {
            call_id: id.into(),
            name: "clock".into(),
            arguments: Box::new(json!({"tz": "UTC"})),
            server: None,
        },
    )
}

fn failed(seq: u64) -> Event {
    event(
        seq,
        EventKind::TurnFailed {
            code: "model_timeout".into(),
            reason: "silent".into(),
            duration_ms: 0,
        },
    )
}

fn result(seq: u64, id: &str, status: ToolStatus) -> Event {
    event(
        seq,
        EventKind::ToolResult {
            call_id: id.into(),
            result: Box::new(json!("12:00")),
            status,
            duration_ms: Some(1),
        },
    )
}

fn output(seq: u64, text: &str) -> Event {
    event(
        seq,
        EventKind::AgentOutput {
            text: text.into(),
            status: OutputStatus::Final,
            duration_ms: 0,
            usage: None,
        },
    )
}

fn roles(messages: &[Message]) -> Vec<&'static str> {
    messages.iter().map(|m| m.role).collect()
}

#[test]
fn system_then_memory_then_history_then_every_merged_input() {
    let history = [input(1, "hi"), output(2, "hello")];
    let inputs = ["a".to_owned(), "b".to_owned()];
    let messages = conversation(
        Some("sys".into()),
        Some("mem".into()),
        &history,
        &inputs,
        false,
    );
    assert_eq!(
        roles(&messages),
        ["system", "system", "user", "assistant", "user", "user"]
    );
    assert_eq!(messages[0].content.as_deref(), Some("sys"));
    assert_eq!(messages[1].content.as_deref(), Some("mem"));
    assert_eq!(messages[5].content.as_deref(), Some("b"));
}

#[test]
fn tool_calls_pair_with_their_results_under_ids_unique_in_the_request() {
    // Two turns both numbered their first call `call-1`.
    let history = [
        input(1, "time?"),
        call(2, "call-1"),
        call(3, "call-2"),
        result(4, "call-2", ToolStatus::Ok),
        result(5, "call-1", ToolStatus::Cancelled),
        output(6, "noon"),
        input(7, "again?"),
        call(8, "call-1"),
        result(9, "call-1", ToolStatus::Ok),
        output(10, "still noon"),
    ];
    let messages = conversation(None, None, &history, &[], false);
    assert_eq!(
        roles(&messages),
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    let ids: Vec<&str> = messages[1]
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["call_2", "call_3"]);
    assert_eq!(messages[2].tool_call_id.as_deref(), Some("call_3"));
    assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_2"));
    assert!(messages[3]
        .content
        .as_deref()
        .unwrap()
        .starts_with("cancelled"));
    assert_eq!(messages[7].tool_call_id.as_deref(), Some("call_8"));
    assert_eq!(
        messages[1].tool_calls[0].function.arguments,
        r#"{"tz":"UTC"}"#
    );
}

#[test]
fn a_call_or_result_without_its_partner_in_the_window_is_left_out() {
    let history = [
        result(1, "call-1", ToolStatus::Ok),
        call(2, "call-2"),
        input(3, "x"),
    ];
    let messages = conversation(None, None, &history, &[], false);
    assert_eq!(roles(&messages), ["user"]);
}

#[test]
fn tool_call_fragments_are_joined_by_index() {
    let mut round = Round::default();
    let chunks = [
        json!({"choices":[{"delta":{"content":"Let me "}}]}),
        json!({"choices":[{"delta":{"tool_calls":[
            {"index":0,"id":"a","function":{"name":"clock","arguments":"{\"tz\""}},
            {"index":1,"id":"b","function":{"name":"calc","arguments":""}}]}}]}),
        json!({"choices":[{"delta":{"tool_calls":[
            {"index":0,"function":{"arguments":":\"UTC\"}"}}]}, "finish_reason":"tool_calls"}]}),
        json!({"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7}}),
    ];
    let added: Vec<String> = chunks
        .into_iter()
        .map(|c| round.apply(serde_json::from_value(c).unwrap()).unwrap())
        .collect();
    assert_eq!(added[0], "Let me ");
    assert_eq!(round.text, "Let me ");
    assert_eq!(round.calls.len(), 2);
    assert_eq!(round.calls[0].arguments, r#"{"tz":"UTC"}"#);
    assert_eq!(round.calls[1].name, "calc");
    assert!(round.finished);
    assert_eq!(round.usage.map(|u| u.input_tokens), Some(11));
}

#[test]
fn only_the_first_answer_is_kept_when_a_server_sends_others() {
    let mut round = Round::default();
    let chunks = [
        json!({"choices":[{"index":0,"delta":{"content":"one "}}]}),
        json!({"choices":[{"index":1,"delta":{"content":"OTHER "}}]}),
        json!({"choices":[{"index":1,"delta":{"content":"x"}},{"index":0,"delta":{"content":"two"}}]}),
        json!({"choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}),
        json!({"choices":[{"index":null,"delta":{"content":"!"}}]}),
    ];
    let added: Vec<String> = chunks
        .into_iter()
        .map(|c| round.apply(serde_json::from_value(c).unwrap()).unwrap())
        .collect();
    assert_eq!(added, ["one ", "", "two", "", "!"]);
    assert_eq!(round.text, "one two!");
    assert!(!round.finished, "the other answer's end is not this one's");
}

#[test]
fn a_refusal_and_the_finish_reason_are_kept_apart_from_the_text() {
    let mut round = Round::default();
    let chunks = [
        json!({"choices":[{"index":0,"delta":{"role":"assistant","refusal":"I can't "}}]}),
        json!({"choices":[{"index":0,"delta":{"refusal":"help."}}]}),
        json!({"choices":[{"index":1,"delta":{},"finish_reason":"length"}]}),
        json!({"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}),
    ];
    let added: Vec<String> = chunks
        .into_iter()
        .map(|c| round.apply(serde_json::from_value(c).unwrap()).unwrap())
        .collect();
    assert_eq!(added, ["", "", "", ""], "a refusal is not streamed as text");
    assert_eq!(round.text, "");
    assert_eq!(round.refusal, "I can't help.");
    assert_eq!(round.finish_reason.as_deref(), Some("content_filter"));
}

#[test]
fn a_refusal_past_its_bound_is_refused() {
    let mut round = Round::default();
    let piece = "x".repeat(MAX_REFUSAL_BYTES / 2 + 1);
    let chunk = || json!({"choices":[{"index":0,"delta":{"refusal": piece}}]});
    round
        .apply(serde_json::from_value(chunk()).unwrap())
        .unwrap();
    let refused = round.apply(serde_json::from_value(chunk()).unwrap());
    assert!(refused.unwrap_err().contains("refusal of more than"));
}

#[test]
fn a_failed_result_keeps_its_error_marking() {
    let history = [
        input(1, "time?"),
        call(2, "call-1"),
        result(3, "call-1", ToolStatus::Error),
        output(4, "sorry"),
    ];
    let messages = conversation(None, None, &history, &[], false);
    assert_eq!(messages[2].content.as_deref(), Some("error: 12:00"));
}

#[test]
fn failed_turns_are_left_out_unless_asked_for() {
    let history = [
        input(1, "hi"),
        output(2, "hello"),
        input(3, "lost"),
        failed(4),
        input(5, "again"),
        output(6, "there"),
    ];
    let texts = |messages: Vec<Message>| -> Vec<String> {
        messages.into_iter().filter_map(|m| m.content).collect()
    };
    let left_out = conversation(None, None, &history, &[], false);
    assert_eq!(texts(left_out), ["hi", "hello", "again", "there"]);
    let kept = conversation(None, None, &history, &[], true);
    assert_eq!(texts(kept), ["hi", "hello", "lost", "again", "there"]);
}

#[test]
fn a_huge_tool_call_index_is_refused_before_anything_is_allocated() {
    for index in [MAX_TOOL_CALLS_PER_ROUND as u64, 999_999_999_999] {
        let mut round = Round::default();
        let chunk = json!({"choices":[{"delta":{"tool_calls":[
            {"index": index, "id": "x", "function": {"name": "f", "arguments": "{}"}}]}}]});
        let err = round
            .apply(serde_json::from_value(chunk).unwrap())
            .unwrap_err();
        assert!(err.contains("past the limit of 64 calls"), "{err}");
        assert!(round.calls.is_empty());
    }
    let mut round = Round::default();
    let last = json!({"choices":[{"delta":{"tool_calls":[
        {"index": MAX_TOOL_CALLS_PER_ROUND - 1, "function": {"name": "f"}}]}}]});
    round.apply(serde_json::from_value(last).unwrap()).unwrap();
    assert_eq!(round.calls.len(), MAX_TOOL_CALLS_PER_ROUND);
}

#[test]
fn tool_call_arguments_past_their_bound_are_refused() {
    let mut round = Round::default();
    let piece = "x".repeat(MAX_TOOL_CALL_BYTES / 4 + 1);
    let chunk = || {
        json!({"choices":[{"delta":{"tool_calls":[
            {"index": 0, "function": {"arguments": piece}}]}}]})
    };
    for _ in 0..3 {
        round
            .apply(serde_json::from_value(chunk()).unwrap())
            .unwrap();
    }
    let err = round
        .apply(serde_json::from_value(chunk()).unwrap())
        .unwrap_err();
    assert!(err.contains("tool calls of more than"), "{err}");
}

#[test]
fn the_request_asks_for_usage_and_leaves_out_what_is_unset() {
    let messages = [Message::text("user", "hi")];
    let request = ChatRequest {
        model: "m",
        messages: &messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        temperature: None,
        max_tokens: Some(5),
        tools: &[],
        tool_choice: None,
        parallel_tool_calls: None,
        response_format: None,
        top_p: None,
    };
    let value = serde_json::to_value(&request).unwrap();
    assert_eq!(value["stream_options"]["include_usage"], json!(true));
    assert_eq!(value["max_tokens"], json!(5));
    assert!(value.get("temperature").is_none() && value.get("tools").is_none());
    for unset in [
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "top_p",
    ] {
        assert!(value.get(unset).is_none(), "{unset}: {value}");
    }
    // An agent's own temperature is written as set, not as the f64 nearest its f32.
    let body = serde_json::to_string(&ChatRequest {
        temperature: Some(Number::Setting(0.7)),
        ..request
    })
    .unwrap();
    assert!(body.contains(r#""temperature":0.7,"#), "{body}");
    assert_eq!(value["messages"][0], json!({"role":"user","content":"hi"}));
}

/// A turn that ended with a call left to its caller: the reply said with it goes with the call,
/// the caller's result (brought by the next message, an empty one) follows the call directly,
/// and the empty message is no user message.
#[test]
fn a_call_left_to_the_caller_is_answered_by_the_next_messages_result() {
    let history = [
        input(1, "what is 2+3"),
        call(2, "server_call"),
        call(3, "client_call"),
        result(4, "server_call", ToolStatus::Ok),
        output(5, "let me add"),
        result(6, "client_call", ToolStatus::Ok),
    ];
    let messages = conversation(None, None, &history, &[String::new()], false);
    assert_eq!(
        roles(&messages),
        ["user", "assistant", "tool", "tool"],
        "{messages:?}"
    );
    assert_eq!(messages[1].content.as_deref(), Some("let me add"));
    assert_eq!(messages[1].tool_calls.len(), 2);
    let answered: Vec<_> = messages[2..]
        .iter()
        .map(|m| m.tool_call_id.clone().unwrap())
        .collect();
    let asked: Vec<_> = messages[1]
        .tool_calls
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(answered, asked);
}
