//! [`OpenAiAgent`]: a model behind any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
//! Ollama, llama.cpp's server, LM Studio, gateways), streaming its reply and calling [`Tool`]s.
//!
//! # Why reqwest and not an SDK crate
//!
//! The full SDK crates stream through an event-source layer that hides the response: it gives no
//! access to `Retry-After`, and it reconnects or reports errors on its own terms, while this agent
//! must retry only before the first chunk and must read a refusal's status and body to say what
//! to fix. They also compile the whole API's types (hundreds of them) for the one endpoint used
//! here. So the HTTP is reqwest (already in the tree), and the hand-written part is small: the SSE
//! line splitting in `sse` and the few request and chunk types in `wire`.
//!
//! # Interrupts
//!
//! The response body is read inside the turn's future. When the runtime interrupts the turn it
//! drops that future, which drops the body half-read; hyper then closes the connection (it cannot
//! be reused mid-body), so the server sees it close and nothing more is read.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{Agent, AgentError, AgentFailure, TurnContext};
use crate::context::MissingKey;
use crate::state::{IncompleteReason, Usage};

mod builder;
mod error;
#[cfg(feature = "mcp")]
mod offer;
mod options;
mod reading;
mod secrets;
mod sse;
mod tool;
mod transport;
mod wire;

pub use builder::OpenAiBuilder;
pub use error::OpenAiError;
pub use options::MAX_CALLER_TOOLS;
#[cfg(feature = "mcp")]
pub(crate) use secrets::Secrets;
use tool::ToolSet;
pub use tool::{Tool, ToolError};

use options::TurnOptions;
use tokio::time::Instant;
use transport::Transport;
use wire::{AskedCall, ChatRequest, Message, Number, StreamOptions, WireToolCall};

/// An [`Agent`] that answers with a model behind an OpenAI-compatible chat-completions endpoint.
///
/// Each turn sends the system prompt (filled from scoped state, `{user:name}`), the
/// `<memory-context>` block, the window's events and the turn's input(s), with `stream: true`;
/// every delta is emitted as a chunk, and the whole reply is returned as the output. Tool calls
/// run (in parallel when several) and are recorded; token usage is reported to the session's
/// statistics and counted in `turnstile_tokens_total{kind="input"|"output"}`.
///
/// ```no_run
/// # fn main() -> Result<(), turnstile::OpenAiError> {
/// use turnstile::{OpenAiAgent, Runtime};
///
/// let agent = OpenAiAgent::builder("http://127.0.0.1:11434/v1", "llama3.2")
///     .with_system_prompt("You are a helpful assistant. The user is {user:name}.")
///     .build()?;
/// let runtime = Runtime::builder().agent(agent).build();
/// # Ok(()) }
/// ```
pub struct OpenAiAgent {
    transport: Transport,
    model: String,
    /// Filled per turn; missing keys render empty (a new user has no name yet).
    system_prompt: Option<String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    /// The application's own tools (`with_tool`) and their definitions, built once.
    library: Arc<ToolSet>,
    /// Tools from MCP servers, offered after the library's (`with_mcp`).
    #[cfg(feature = "mcp")]
    mcp: Option<offer::McpOffer>,
    max_tool_rounds: usize,
    /// The longest a turn may take in the agent: requests, retries and their waits, streaming
    /// and tools together.
    turn_timeout: Duration,
    /// Send the inputs of failed turns in the history to the model (left out by default).
    failed_turns_in_context: bool,
}

impl std::fmt::Debug for OpenAiAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiAgent")
            .field("url", &self.transport.shown)
            .field("model", &self.model)
            .field("tools", &self.library.tools.len())
            .finish_non_exhaustive()
    }
}

impl OpenAiAgent {
    /// The chat-completions endpoint this agent posts to.
    pub fn url(&self) -> &str {
        &self.transport.url
    }

    /// The tools a turn offers: the library's, then those of the MCP servers now.
    fn offered(&self) -> Arc<ToolSet> {
        #[cfg(feature = "mcp")]
        if let Some(mcp) = &self.mcp {
            return mcp.offered(&self.library);
        }
        self.library.clone()
    }
}

/// How a model request ended, short of an error.
enum Ended {
    /// The response is complete.
    Done(wire::Round),
    /// The turn was interrupted while it streamed.
    Cancelled,
}

#[async_trait]
impl Agent for OpenAiAgent {
    /// Every attribute of [`crate::agent::ATTRIBUTES`]: instructions, the caller's tools and how tools are
    /// chosen, structured output, sampling.
    fn attributes(&self) -> &'static [&'static str] {
        crate::agent::attributes::ATTRIBUTES
    }

    /// The library's tools, then those of the MCP servers now.
    fn tool_names(&self) -> Vec<String> {
        self.offered()
            .tools
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect()
    }

    /// Answers the turn; a failure is an [`AgentFailure`] of the error's
    /// [`kind`](OpenAiError::kind), its message scrubbed of secrets, with the [`OpenAiError`]
    /// as its source.
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let deadline = Instant::now() + self.turn_timeout;
        let answered = tokio::time::timeout_at(deadline, self.answer(&turn, deadline)).await;
        let error = match answered {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(error)) => error,
            Err(_) => {
                let error = OpenAiError::TurnTimeout {
                    url: self.transport.shown.clone(),
                    budget: self.turn_timeout,
                };
                tracing::warn!(url = %self.transport.shown, %error, "a model turn timed out");
                error
            }
        };
        let detail = self
            .transport
            .secrets
            .scrub_within(&error.to_string(), usize::MAX);
        // The history keeps the kind's sentence: the error names the endpoint and quotes the
        // server, which is for operators (logged) and the embedder, not the session's user.
        let mut failure =
            AgentFailure::new(error.kind(), error.kind().public_reason()).with_detail(detail);
        if let Some(wait) = error.retry_after() {
            failure = failure.with_retry_after(wait);
        }
        Err(Box::new(failure.with_source(error)))
    }
}

impl OpenAiAgent {
    /// The turn's loop: ask the model, run the tools it calls, until it answers in words — or
    /// until it calls a tool the caller runs, which ends the turn with that call open.
    async fn answer(&self, turn: &TurnContext, deadline: Instant) -> Result<String, OpenAiError> {
        let options = TurnOptions::of(turn)?;
        let system = match &self.system_prompt {
            Some(template) => Some(turn.render(template, MissingKey::Empty)?),
            None => None,
        };
        let system = match (system, &options.instructions) {
            (Some(prompt), Some(told)) => Some(format!("{prompt}\n\n{told}")),
            (prompt, told) => prompt.or_else(|| told.clone()),
        };
        let mut messages = wire::conversation(
            system,
            turn.memory_context(),
            turn.history(),
            turn.inputs(),
            self.failed_turns_in_context,
        );
        let mut reply = String::new();
        let mut usage = Usage::default();
        let mut calls_made = 0;
        // One set for the whole turn: the calls it runs are the tools its requests offered.
        let tools = self.offered();
        let definitions = with_callers_tools(&tools, &options)?;
        for round_no in 1..=self.max_tool_rounds {
            let round = Round {
                number: u32::try_from(round_no).unwrap_or(u32::MAX),
                first: round_no == 1,
                last: round_no == self.max_tool_rounds,
            };
            let asked = match self
                .stream_round(turn, &messages, &definitions, &options, round, deadline)
                .await?
            {
                Ended::Done(asked) => asked,
                Ended::Cancelled => return Ok(reply),
            };
            reply.push_str(&asked.text);
            if let Some(used) = asked.usage {
                count_tokens(used);
                // Counts come from the server: saturate rather than overflow.
                usage.input_tokens = usage.input_tokens.saturating_add(used.input_tokens);
                usage.output_tokens = usage.output_tokens.saturating_add(used.output_tokens);
                turn.report_usage(usage);
            }
            if asked.calls.is_empty() {
                report_ending(turn, &asked);
                return Ok(reply);
            }
            if round.last {
                break;
            }
            let text = (!asked.text.is_empty()).then(|| asked.text.clone());
            let ran = self
                .run_tools(turn, &tools, &options, asked.calls, &mut calls_made)
                .await;
            match ran {
                Ran::All(calls, results) => {
                    messages.push(Message::tool_calls(text, calls));
                    messages.extend(results);
                }
                // The caller runs the rest: the turn ends here, its calls open.
                Ran::LeftToCaller | Ran::Cancelled => return Ok(reply),
            }
        }
        Err(OpenAiError::TooManyToolRounds {
            rounds: self.max_tool_rounds,
        })
    }

    /// Sends one request and streams its deltas to the turn; a failure after the response
    /// started is logged at WARN (those before are logged by the transport, per attempt).
    async fn stream_round(
        &self,
        turn: &TurnContext,
        messages: &[Message],
        definitions: &[Value],
        options: &TurnOptions,
        round: Round,
        deadline: Instant,
    ) -> Result<Ended, OpenAiError> {
        let response = self
            .open_round(turn, messages, definitions, options, round, deadline)
            .await?;
        let Some((response, mark)) = response else {
            return Ok(Ended::Cancelled);
        };
        let streamed = self.read_round(turn, response).await;
        turn.model_request_ended(mark);
        if let Err(error) = &streamed {
            tracing::warn!(url = %self.transport.shown, %error, "a model response failed");
        }
        streamed
    }

    /// Sends the request for one round; `None` if the turn was interrupted meanwhile.
    async fn open_round(
        &self,
        turn: &TurnContext,
        messages: &[Message],
        definitions: &[Value],
        options: &TurnOptions,
        round: Round,
        deadline: Instant,
    ) -> Result<Option<(reqwest::Response, crate::agent::ModelRequestId)>, OpenAiError> {
        let tool_choice = match (round.last, round.first) {
            (true, _) if !definitions.is_empty() => Some(Value::from("none")),
            (_, true) => options.tool_choice.clone(),
            _ => None,
        };
        let request = ChatRequest {
            model: &self.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: match options.temperature {
                Some(given) => Some(Number::Given(given)),
                None => self.temperature.map(Number::Setting),
            },
            max_tokens: options.max_tokens.or(self.max_tokens.map(u64::from)),
            tools: definitions,
            tool_choice,
            parallel_tool_calls: options
                .parallel_tool_calls
                .filter(|_| !definitions.is_empty()),
            response_format: options.response_format.as_ref(),
            top_p: options.top_p,
        };
        let cancel = turn.cancellation();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Ok(None),
            response = self.transport.open(&request, deadline, turn, round.number) => {
                response.map(Some)
            }
        }
    }

    /// Records and runs the calls the model asked for, all at once; returns the assistant's
    /// calls and the tool messages answering them. Calls of the caller's tools are recorded
    /// open and not run: the others still run, and the turn then ends.
    ///
    /// Calls get ids of their own in the requests (`made` counts the turn's calls so far): the
    /// model's may repeat, within a response or across the turn, or match a history call's.
    async fn run_tools(
        &self,
        turn: &TurnContext,
        tools: &ToolSet,
        options: &TurnOptions,
        asked: Vec<AskedCall>,
        made: &mut usize,
    ) -> Ran {
        let mut calls = Vec::with_capacity(asked.len());
        let mut runs = Vec::with_capacity(asked.len());
        let mut left_to_caller = false;
        for call in asked {
            *made += 1;
            let wire_id = wire::current_call_id(*made);
            let arguments = parse_arguments(&call.arguments);
            let shown = arguments
                .clone()
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            if options.tool_names.contains(&call.name) {
                turn.tool_call_for_caller(call.name.clone(), shown);
                left_to_caller = true;
                continue;
            }
            let tool = tools.find(&call.name).cloned();
            let recorded = match tool.as_ref().and_then(|t| t.server()) {
                Some(server) => turn.tool_call_via(server, call.name.clone(), shown),
                None => turn.tool_call(call.name.clone(), shown),
            };
            calls.push(WireToolCall::new(
                wire_id.clone(),
                call.name.clone(),
                call.arguments,
            ));
            runs.push(async move {
                let result = match (tool, arguments) {
                    (None, _) => Err(Value::String(format!(
                        "there is no tool named {:?}",
                        call.name
                    ))),
                    (Some(_), Err(reason)) => Err(Value::String(reason)),
                    (Some(tool), Ok(arguments)) => tool
                        .call(arguments)
                        .await
                        .map_err(|e| Value::String(e.to_string())),
                };
                turn.tool_result(&recorded, result.clone());
                turn.flush().await;
                let text = match &result {
                    Ok(value) => wire::tool_text(value),
                    Err(value) => wire::error_text(value),
                };
                Message::tool_result(wire_id, text)
            });
        }
        turn.flush().await;
        tokio::select! {
            biased;
            () = turn.cancellation().cancelled() => Ran::Cancelled,
            results = futures::future::join_all(runs) => match left_to_caller {
                true => Ran::LeftToCaller,
                false => Ran::All(calls, results),
            },
        }
    }
}

/// Which request of the turn a round is.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// 1 for the turn's first request to the model, one more for each tool round.
    number: u32,
    first: bool,
    last: bool,
}

/// How the tool calls of a round ended.
enum Ran {
    /// Every call ran: the assistant's calls and the results to send back.
    All(Vec<WireToolCall>, Vec<Message>),
    /// Some calls are the caller's to run: the turn ends.
    LeftToCaller,
    /// The turn was interrupted.
    Cancelled,
}

/// The definitions a turn offers: the agent's tools, then the caller's (none of which may take
/// the name of one of the agent's).
fn with_callers_tools(tools: &ToolSet, options: &TurnOptions) -> Result<Vec<Value>, OpenAiError> {
    if options.tools.is_empty() {
        return Ok(tools.definitions.clone());
    }
    if let Some(taken) = tools
        .tools
        .iter()
        .find(|t| options.tool_names.contains(t.name()))
    {
        return Err(OpenAiError::TurnOption {
            name: crate::agent::TOOLS_ATTRIBUTE.to_owned(),
            detail: format!(
                "the tool {:?} is one of the agent's own; give the caller's another name",
                taken.name()
            ),
        });
    }
    let mut all = tools.definitions.clone();
    all.extend(options.tools.iter().cloned());
    Ok(all)
}

/// Tells the turn how the model's last answer ended when it is not an answer: a refusal (kept
/// as one, not as text), or a reply cut by the token limit or a content filter.
fn report_ending(turn: &TurnContext, asked: &wire::Round) {
    if !asked.refusal.is_empty() {
        turn.report_refusal(asked.refusal.clone());
        return;
    }
    match asked.finish_reason.as_deref() {
        Some("length") => turn.report_incomplete(IncompleteReason::MaxTokens),
        Some("content_filter") => turn.report_incomplete(IncompleteReason::ContentFilter),
        _ => {}
    }
}

/// A call's arguments: a JSON object, or an empty string meaning none.
fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| format!("the arguments are not valid JSON: {e}"))
}

/// Adds a response's usage to `turnstile_tokens_total`.
fn count_tokens(usage: Usage) {
    metrics::counter!("turnstile_tokens_total", "kind" => "input").increment(usage.input_tokens);
    metrics::counter!("turnstile_tokens_total", "kind" => "output").increment(usage.output_tokens);
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_base_url_and_chat_completions() {
        let agent = OpenAiAgent::builder("http://127.0.0.1:9/v1/", "m")
            .without_api_key()
            .build()
            .unwrap();
        assert_eq!(agent.url(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(!format!("{agent:?}").contains("key"));
    }

    #[test]
    fn arguments_parse_or_say_why() {
        assert_eq!(parse_arguments(" ").unwrap(), serde_json::json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap()["a"], 1);
        assert!(parse_arguments("{oops")
            .unwrap_err()
            .contains("not valid JSON"));
    }
}
