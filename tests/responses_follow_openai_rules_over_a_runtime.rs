//! Property: `turnstile::responses`, the OpenAI rules as a library over a `Runtime`, keeps what
//! each rule promises under the cases a client meets: a retry that says something else is
//! refused without disturbing the response it names (which still runs, is retrieved
//! `in_progress` and cancelled); a response in a conversation that does not exist is refused
//! without starting a session; an MCP server's calls show as `mcp_call` output items and stream
//! as items; a call of the client's tools is answered by a later output, also after a
//! continuation that failed; a call already in the conversation is not brought again.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::harness::*;
use tokio::sync::Semaphore;
use turnstile::agent::TOOLS_ATTRIBUTE;
use turnstile::responses::{
    new_id, Created, ResponseEvent, ResponseId, ResponseRequest, Responses, ResponsesError,
};
use turnstile::{Agent, AgentError, Error, InMemoryStore, Runtime, TurnContext};

/// Holds turns whose input starts with "hold" until the test lets one go; calls an MCP-style
/// tool for "mcp"; calls the client's `add` for "add" (and fails the continuation that answers
/// it when told to); echoes anything else.
struct Scripted {
    gate: Semaphore,
    held: AtomicUsize,
    fail_continuations: AtomicUsize,
}

impl Default for Scripted {
    fn default() -> Self {
        Self {
            gate: Semaphore::new(0),
            held: AtomicUsize::new(0),
            fail_continuations: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl Agent for Scripted {
    fn attributes(&self) -> &'static [&'static str] {
        &[TOOLS_ATTRIBUTE]
    }

    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let input = turn.input();
        if input.starts_with("hold") {
            self.held.fetch_add(1, Ordering::SeqCst);
            tokio::select! {
                permit = self.gate.acquire() => permit.expect("open").forget(),
                () = turn.cancellation().cancelled() => {}
            }
            turn.emit("held reply").await;
            return Ok("held reply".into());
        }
        if input == "mcp" {
            let call = turn.tool_call_via("time", "now", json!({"zone": "UTC"}));
            turn.tool_result(&call, Ok(json!("12:00")));
            turn.emit("it is noon").await;
            return Ok("it is noon".into());
        }
        if input == "add" {
            turn.tool_call_for_caller("add", json!({"a": 2, "b": 3}));
            return Ok(String::new());
        }
        if input.is_empty() && self.fail_continuations.load(Ordering::SeqCst) > 0 {
            self.fail_continuations.fetch_sub(1, Ordering::SeqCst);
            return Err("the model is down".into());
        }
        Ok(format!("echo: {input}"))
    }
}

fn service() -> (Responses, Arc<Scripted>) {
    let agent = Arc::new(Scripted::default());
    let runtime = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    (Responses::new(runtime, "m"), agent)
}

fn request(body: Value) -> ResponseRequest {
    ResponseRequest::from_json(body).expect("a request the server takes")
}

async fn finished(
    created: Created,
) -> Result<turnstile::responses::ResponseObject, ResponsesError> {
    match created {
        Created::Finished(finished) => within(finished).await,
        other => panic!("not answered once stored: {other:?}"),
    }
}

#[tokio::test]
async fn a_retry_with_another_body_is_refused_and_the_response_runs_on() {
    let (responses, agent) = service();
    let first = request(json!({"input": "hold on"}));
    let created = within(responses.create("u", first, Some("k1")))
        .await
        .unwrap();
    eventually("the turn runs", || agent.held.load(Ordering::SeqCst) == 1).await;
    let Created::Finished(waiting) = created else {
        panic!("not answered once stored")
    };
    let other = request(json!({"input": "hold something else"}));
    let refused = finished(
        within(responses.create("u", other, Some("k1")))
            .await
            .unwrap(),
    )
    .await;
    assert!(
        matches!(
            &refused,
            Err(ResponsesError::Runtime(Error::RequestMismatch { .. }))
        ),
        "{refused:?}"
    );
    // The response the key names is untouched by the refusal: still running.
    assert_eq!(responses.running(), 1);
    let seed = "u\0k1";
    let named = ResponseId::new(&new_id("conv_", Some(seed)), Some(seed)).to_string();
    let during = within(responses.retrieve("u", &named)).await.unwrap();
    assert_eq!(during.status(), "in_progress", "{:?}", during.to_value());
    let id = {
        let same = request(json!({"input": "hold on"}));
        let again = within(responses.create("u", same, Some("k1")))
            .await
            .unwrap();
        let Created::Finished(again) = again else {
            panic!("not answered once stored")
        };
        agent.gate.add_permits(1);
        let shared = within(again).await.unwrap();
        let original = within(waiting).await.unwrap();
        assert_eq!(shared.id(), original.id(), "a retry shares its response");
        assert_eq!(original.status(), "completed");
        original.id().to_owned()
    };
    eventually("the response is forgotten", || responses.running() == 0).await;
    let read = within(responses.retrieve("u", &id)).await.unwrap();
    assert_eq!(read.status(), "completed");
}

#[tokio::test]
async fn a_running_response_is_retrieved_in_progress_and_cancelled_from_anywhere() {
    let (responses, agent) = service();
    // A background response names itself at once: cancel it from another "connection".
    let created = within(responses.create(
        "u",
        request(json!({"input": "hold too", "background": true})),
        None,
    ))
    .await
    .unwrap();
    let Created::Background(queued) = created else {
        panic!("not answered at once")
    };
    assert_eq!(queued.status(), "queued");
    eventually("it runs", || agent.held.load(Ordering::SeqCst) == 1).await;
    let running = within(responses.retrieve("u", queued.id())).await.unwrap();
    assert_eq!(running.status(), "in_progress");
    let cancelled = within(responses.cancel("u", queued.id(), TIMEOUT))
        .await
        .unwrap();
    assert_eq!(cancelled.status(), "cancelled");
    let kept = within(responses.retrieve("u", queued.id())).await.unwrap();
    assert_eq!(
        kept.status(),
        "cancelled",
        "read back from the log, still cancelled"
    );
    eventually("every response is forgotten", || responses.running() == 0).await;
}

#[tokio::test]
async fn a_response_in_a_conversation_that_does_not_exist_is_refused_and_starts_nothing() {
    let (responses, _) = service();
    let missing = |extra: Value| {
        let mut body = json!({"input": "hi", "conversation": "conv_nowhere"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        request(body)
    };
    fn not_found<T>(refused: &Result<T, ResponsesError>) -> bool {
        matches!(refused, Err(ResponsesError::NotFound { param: Some(p), .. }) if p == "conversation")
    }
    // Answered once stored: the session refuses the turn, and is let go of at once.
    let refused = finished(
        within(responses.create("u", missing(json!({})), None))
            .await
            .unwrap(),
    )
    .await;
    assert!(not_found(&refused), "{refused:?}");
    eventually("the woken session is let go of", || {
        responses.runtime().live_sessions() == 0
    })
    .await;
    // Streamed or in the background: refused before any event.
    for extra in [json!({"stream": true}), json!({"background": true})] {
        let refused = within(responses.create("u", missing(extra.clone()), None)).await;
        let refused = refused.map(|_| ());
        assert!(not_found(&refused), "{extra}: {refused:?}");
    }
    assert_eq!(responses.runtime().live_sessions(), 0, "no session started");
    let stored = within(
        responses
            .runtime()
            .last_seq(&turnstile::SessionKey::new("u", "conv_nowhere").unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(stored, None, "nothing stored");
}

#[tokio::test]
async fn mcp_calls_are_output_items_and_stream_as_items() {
    let (responses, _) = service();
    let object = finished(
        within(responses.create("u", request(json!({"input": "mcp"})), None))
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let output = object.output();
    assert_eq!(output[0]["type"], "mcp_call", "{output:#?}");
    assert_eq!(output[0]["server_label"], "time");
    assert_eq!(output[0]["output"], "12:00");
    assert_eq!(output[0]["arguments"], "{\"zone\":\"UTC\"}");
    assert_eq!(output[1]["type"], "message");

    let streamed =
        within(responses.create("u", request(json!({"input": "mcp", "stream": true})), None))
            .await
            .unwrap();
    let Created::Events(mut events) = streamed else {
        panic!("not streamed")
    };
    let mut seen = Vec::new();
    while let Some(event) = within(events.next()).await {
        let ResponseEvent::Typed { kind, data } = event else {
            panic!("the turn failed")
        };
        let data: Value = serde_json::from_str(&data).unwrap();
        seen.push((kind, data["item"]["type"].as_str().unwrap_or("").to_owned()));
    }
    let items: Vec<(&str, &str)> = seen
        .iter()
        .filter(|(kind, _)| kind.starts_with("response.output_item"))
        .map(|(kind, item)| (*kind, item.as_str()))
        .collect();
    assert_eq!(
        items,
        [
            ("response.output_item.added", "mcp_call"),
            ("response.output_item.done", "mcp_call"),
            ("response.output_item.added", "message"),
            ("response.output_item.done", "message"),
        ]
    );
    assert_eq!(seen.last().unwrap().0, "response.completed");
}

#[tokio::test]
async fn a_client_call_is_answered_again_after_a_failed_continuation_and_never_brought_twice() {
    let (responses, agent) = service();
    let tools = json!([{"type": "function", "name": "add", "parameters": {"type": "object"}}]);
    let asked = finished(
        within(responses.create("u", request(json!({"input": "add", "tools": tools})), None))
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let output = asked.output();
    assert_eq!(output.len(), 1, "the call alone: {output:#?}");
    let call_id = output[0]["call_id"].as_str().unwrap().to_owned();
    let conversation = asked.to_value()["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = |extra: Value| {
        let mut input = vec![json!({"type": "function_call_output", "call_id": call_id,
            "output": "5"})];
        if !extra.is_null() {
            input.insert(0, extra);
        }
        request(json!({"conversation": conversation, "input": input, "tools": tools}))
    };
    agent.fail_continuations.store(1, Ordering::SeqCst);
    let failed = finished(
        within(responses.create("u", answer(Value::Null), None))
            .await
            .unwrap(),
    )
    .await;
    assert!(failed.is_err(), "the continuation failed: {failed:?}");
    // The call waits again: the same output is taken.
    let answered = finished(
        within(responses.create("u", answer(Value::Null), None))
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(answered.status(), "completed");
    // A call the conversation holds already is not brought again.
    let twice = json!({"type": "function_call", "call_id": call_id, "name": "add",
        "arguments": "{}"});
    let refused = within(responses.create("u", answer(twice), None)).await;
    assert!(
        matches!(&refused, Err(ResponsesError::Invalid { param, .. }) if param == "input"),
        "{refused:?}"
    );
}
