//! A model with a tool behind turnstile: an `OpenAiAgent` at a base URL from the environment,
//! offered a clock tool, answering two turns of one session with the reply streamed as it comes.
//!
//! ```sh
//! # Ollama (no key needed):
//! OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2 \
//!     cargo run --example openai_chat
//! # Any OpenAI-compatible server; the key is read from OPENAI_API_KEY when set:
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_MODEL=gpt-4o-mini OPENAI_API_KEY=… \
//!     cargo run --example openai_chat
//! ```
//!
//! Whether the model calls the tool is the model's choice; the history printed at the end shows
//! the calls it made and their results.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Value};
use turnstile::state::EventKind;
use turnstile::{
    CallOptions, InMemoryStore, OpenAiAgent, Runtime, SessionKey, StreamEvent, Tool, ToolError,
};

/// Tells the time, in seconds since the Unix epoch and as UTC hours and minutes.
struct Clock;

#[async_trait]
impl Tool for Clock {
    fn name(&self) -> &str {
        "clock"
    }

    fn description(&self) -> &str {
        "Returns the current time in UTC."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_err(|e| ToolError(format!("the system clock is before 1970: {e}")))?
            .as_secs();
        let (hours, minutes) = ((now / 3600) % 24, (now / 60) % 60);
        Ok(json!({"unix_seconds": now, "utc": format!("{hours:02}:{minutes:02}")}))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base_url =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:11434/v1".into());
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "llama3.2".into());
    let agent = OpenAiAgent::builder(base_url, model)
        .with_system_prompt("You are a concise assistant talking to {user:name}.")
        .with_tool(Clock)
        .build()?;
    let runtime = Runtime::builder()
        .agent(agent)
        .store(InMemoryStore::new())
        .build()?;
    let key = SessionKey::new("ada", "example")?;

    for input in ["What time is it in UTC?", "And what did I just ask you?"] {
        println!("you> {input}");
        print!("model> ");
        let mut stream = runtime
            .call_streaming(&key, input, CallOptions::default())
            .await?;
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Chunk(chunk) => {
                    print!("{chunk}");
                    std::io::stdout().flush()?;
                }
                StreamEvent::ToolCall {
                    name, arguments, ..
                } => println!("\n  [calling {name} {arguments}]"),
                StreamEvent::Outcome(outcome) => {
                    outcome?;
                    println!();
                }
                _ => {}
            }
        }
    }

    let view = runtime.state(&key).await?.expect("the session exists");
    println!("\nhistory:");
    for event in &view.events {
        match &event.kind {
            EventKind::ToolCall {
                name, arguments, ..
            } => println!("  tool call   {name} {arguments}"),
            EventKind::ToolResult { result, .. } => println!("  tool result {result}"),
            EventKind::UserInput { text, .. } => println!("  user        {text}"),
            EventKind::AgentOutput { text, .. } => println!("  model       {text}"),
            _ => {}
        }
    }
    let stats = &view.record.stats;
    println!(
        "tokens: {} in, {} out",
        stats.input_tokens, stats.output_tokens
    );
    runtime.shutdown().await;
    Ok(())
}
