//! Agents for the artifact and state-key tests.

use async_trait::async_trait;
use serde_json::Value;
use turnstile::{Agent, AgentError, TurnContext};

/// Saves each input as the next version of `note.txt` (or, for an input `user:TEXT`, of the
/// user's `shared.txt`) and replies with the version saved.
pub struct SavingAgent;

#[async_trait]
impl Agent for SavingAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let input = turn.input();
        let (name, text) = match input.strip_prefix("user:") {
            Some(text) => ("user:shared.txt", text.to_owned()),
            None => ("note.txt", input),
        };
        let version = turn
            .save_artifact(name, text.as_bytes(), "text/plain")
            .await?;
        Ok(format!("saved {name} v{version}"))
    }
}

/// Writes every field of its input (a JSON object) as a state key, then replies with the
/// values of the keys named in the attribute-free input `?k1,k2` (read through `get`).
pub struct StateAgent;

#[async_trait]
impl Agent for StateAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let input = turn.input();
        if let Some(names) = input.strip_prefix('?') {
            let values: Vec<Value> = names
                .split(',')
                .map(|k| turn.get(k).unwrap_or(Value::Null))
                .collect();
            return Ok(Value::from(values).to_string());
        }
        let writes: serde_json::Map<String, Value> = serde_json::from_str(&input)?;
        for (key, value) in writes {
            turn.set(key, value);
        }
        Ok("written".to_owned())
    }
}
