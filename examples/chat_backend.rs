//! A chat backend embedding turnstile: one `Runtime` shared by every request handler, an agent
//! that calls a tool, and an interrupt sent from a second task while a reply streams.
//!
//! Run it with `cargo run --example chat_backend`.
//!
//! The "request handlers" here are plain tasks; in a real service they are the handlers of an
//! HTTP framework, each holding a clone of the same `Runtime`.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use turnstile::state::{EventKind, Usage};
use turnstile::{
    Agent, AgentError, CallOptions, InMemoryStore, OutcomeKind, Runtime, SessionKey, StreamEvent,
    TurnContext,
};

/// A support agent: it looks a parcel up with a (simulated) tracking tool, then streams its
/// answer word by word, as an LLM would.
struct SupportAgent;

#[async_trait]
impl Agent for SupportAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let input = turn.input();
        let mut reply = String::new();
        if input.contains("parcel") {
            // The call and its result are recorded in the session's history.
            let call = turn.tool_call("track_parcel", json!({ "parcel": "NL-4711" }));
            tokio::time::sleep(Duration::from_millis(20)).await; // the tracking API
            turn.tool_result(
                &call,
                Ok(json!({ "status": "out for delivery", "eta": "14:00" })),
            );
            turn.set("user:last_parcel", "NL-4711");
            reply.push_str("Your parcel NL-4711 is out for delivery, expected at 14:00. ");
        }
        if input.contains("poem") {
            reply.push_str(&"A parcel travels far and wide, ".repeat(20));
        } else {
            reply.push_str("Anything else I can help with?");
        }
        // Stream it: an interrupt stops the turn at one of these awaits, keeping what was sent.
        let mut sent = String::new();
        for word in reply.split_inclusive(' ') {
            tokio::time::sleep(Duration::from_millis(5)).await;
            turn.emit(word).await;
            sent.push_str(word);
        }
        turn.report_usage(Usage {
            input_tokens: input.split_whitespace().count() as u64,
            output_tokens: sent.split_whitespace().count() as u64,
        });
        Ok(sent)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // One runtime for the whole service: in production, `FileStore::open_default()` or Redis.
    let runtime = Runtime::builder()
        .agent(SupportAgent)
        .store(InMemoryStore::new())
        .build()?;

    // Several handlers at once, for different users: their sessions run in parallel.
    let handlers: Vec<_> = ["alice", "bob", "carol"]
        .into_iter()
        .map(|user| {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                let key = SessionKey::new(user, "support")?;
                let outcome = runtime.call(&key, "Where is my parcel?").await?;
                println!("[{user}] {}", outcome.output);
                Ok::<_, turnstile::Error>(())
            })
        })
        .collect();
    for handler in handlers {
        handler.await??;
    }

    // Alice asks for something long, streamed; a second task (the "stop" button) interrupts it
    // once the first words have arrived.
    let alice = SessionKey::new("alice", "support")?;
    let mut stream = runtime
        .call_streaming(
            &alice,
            "Write me a poem about my parcel",
            CallOptions::default(),
        )
        .await?;
    let mut stop_button = None;
    let mut streamed = String::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::Chunk(chunk) => {
                streamed.push_str(&chunk);
                if stop_button.is_none() {
                    let (runtime, key) = (runtime.clone(), alice.clone());
                    stop_button = Some(tokio::spawn(async move { runtime.interrupt(&key) }));
                }
            }
            StreamEvent::Outcome(outcome) => {
                let outcome = outcome?;
                assert!(matches!(outcome.kind, OutcomeKind::Interrupted(_)));
                println!(
                    "[alice] interrupted after {} words: {streamed:?}",
                    outcome.output.split_whitespace().count()
                );
            }
            // Tool calls and results, as they happen; this example shows the reply only.
            _ => {}
        }
    }
    if let Some(button) = stop_button {
        println!("[stop button] reached a running turn: {}", button.await?);
    }

    // The history keeps the tool call, its result and the partial, interrupted answer.
    if let Some(view) = runtime.state(&alice).await? {
        for event in &view.events {
            let what = match &event.kind {
                EventKind::UserInput { text, .. } => format!("user: {text}"),
                EventKind::ToolCall { name, .. } => format!("tool call: {name}"),
                EventKind::ToolResult { result, .. } => format!("tool result: {result}"),
                EventKind::AgentOutput { status, text, .. } => {
                    format!("agent ({status:?}): {} chars", text.len())
                }
                other => format!("{other:?}"),
            };
            println!("  #{} {what}", event.seq);
        }
        println!("  user state: {:?}", view.user_state);
    }
    runtime.shutdown().await;
    Ok(())
}
