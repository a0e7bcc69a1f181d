//! The `--agent` argument of `load`, `serve` and `chat`: which agent answers the turns, and the
//! model options of `--agent openai`.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use turnstile::{Agent, EchoAgent, MockLlmAgent};

use super::mcp_arg::Mcp;

/// Which agent answers the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// `MockLlmAgent`: latency, streamed chunks, token usage.
    Mock,
    /// `EchoAgent`: the input back, at once.
    Echo,
}

impl FromStr for AgentKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mock" => Ok(Self::Mock),
            "echo" => Ok(Self::Echo),
            _ => Err(format!("unknown agent {s:?}; expected mock or echo")),
        }
    }
}

impl AgentKind {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mock => "mock",
            Self::Echo => "echo",
        }
    }
}

/// The `--agent` of `serve` and `chat`: a built-in agent, or a model (`openai`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentChoice {
    /// `mock` or `echo`.
    Builtin(AgentKind),
    /// `OpenAiAgent` at `--base-url`.
    OpenAi,
}

impl FromStr for AgentChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openai" => Ok(Self::OpenAi),
            _ => s
                .parse()
                .map(Self::Builtin)
                .map_err(|_| format!("unknown agent {s:?}; expected mock, echo or openai")),
        }
    }
}

/// Options of `--agent openai`: a model behind an OpenAI-compatible chat-completions endpoint.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// With `--agent openai`: the API's base URL, the part before `/chat/completions`
    /// (`https://api.openai.com/v1`, `http://127.0.0.1:11434/v1` for Ollama).
    #[arg(long, env = "TURNSTILE_BASE_URL")]
    base_url: Option<String>,
    /// With `--agent openai`: the model name.
    #[arg(long, env = "TURNSTILE_MODEL")]
    model: Option<String>,
    /// With `--agent openai`: the environment variable holding the API key (it must be set).
    /// Without it, OPENAI_API_KEY is used when set, and no key is sent otherwise.
    #[arg(long)]
    api_key_env: Option<String>,
    /// With `--agent openai`: a file holding the system prompt, a template whose
    /// `{user:name}`-style placeholders are filled from the session's state.
    #[arg(long)]
    system_prompt: Option<PathBuf>,
    /// With `--agent openai`: the sampling temperature.
    #[arg(long)]
    temperature: Option<f32>,
    /// With `--agent openai`: the most tokens per model response.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// With `--agent openai`: seconds one model request may wait for its response to start,
    /// and then between two chunks, before it counts as failed (retried if nothing streamed
    /// yet). Default 60.
    #[arg(long, value_name = "SECS", value_parser = super::limits_arg::parse_seconds)]
    model_timeout: Option<Duration>,
    /// With `--agent openai`: seconds a turn may spend on the model in all — requests, retries
    /// and their waits, streaming, tools — before it fails as `model_timeout`. Default 300.
    #[arg(long, value_name = "SECS", value_parser = super::limits_arg::parse_seconds)]
    model_turn_timeout: Option<Duration>,
}

/// The model name `GET /v1/models` lists for the chosen agent: `--model`'s, or the built-in
/// agent's (`turnstile-mock`, `turnstile-echo`).
pub fn model_name(choice: AgentChoice, model: &ModelArgs) -> String {
    match choice {
        AgentChoice::Builtin(AgentKind::Mock) => "turnstile-mock".into(),
        AgentChoice::Builtin(AgentKind::Echo) => "turnstile-echo".into(),
        AgentChoice::OpenAi => model.model.clone().unwrap_or_else(|| "turnstile".into()),
    }
}

/// Builds the chosen agent: the mock with `latency_ms` and `chunks`, echo, or the model (with
/// the tools of `mcp`'s servers, which only the model can use).
pub fn build_agent(
    choice: AgentChoice,
    latency_ms: u64,
    chunks: usize,
    model: &ModelArgs,
    mcp: &Mcp,
) -> Result<Arc<dyn Agent>, String> {
    if mcp.is_connected() && choice != AgentChoice::OpenAi {
        return Err(super::mcp_arg::NOT_A_MODEL.into());
    }
    match choice {
        AgentChoice::Builtin(AgentKind::Mock) => Ok(Arc::new(
            MockLlmAgent::new()
                .with_latency(Duration::from_millis(latency_ms))
                .with_chunks(chunks),
        )),
        AgentChoice::Builtin(AgentKind::Echo) => Ok(Arc::new(EchoAgent)),
        AgentChoice::OpenAi => model_agent(model, mcp),
    }
}

#[cfg(feature = "openai")]
fn model_agent(args: &ModelArgs, mcp: &Mcp) -> Result<Arc<dyn Agent>, String> {
    let (Some(base_url), Some(model)) = (&args.base_url, &args.model) else {
        return Err("--agent openai needs --base-url URL and --model NAME".into());
    };
    let mut builder = turnstile::OpenAiAgent::builder(base_url, model);
    if let Some(var) = &args.api_key_env {
        builder = builder.with_api_key_env(var);
    }
    if let Some(path) = &args.system_prompt {
        let prompt = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the system prompt {}: {e}", path.display()))?;
        builder = builder.with_system_prompt(prompt);
    }
    if let Some(temperature) = args.temperature {
        builder = builder.with_temperature(temperature);
    }
    if let Some(max_tokens) = args.max_tokens {
        builder = builder.with_max_tokens(max_tokens);
    }
    if let Some(timeout) = args.model_timeout {
        builder = builder.with_timeout(timeout);
    }
    if let Some(timeout) = args.model_turn_timeout {
        builder = builder.with_turn_timeout(timeout);
    }
    #[cfg(feature = "mcp")]
    if let Some(tools) = mcp.tools() {
        builder = builder.with_mcp(tools);
    }
    #[cfg(not(feature = "mcp"))]
    let _ = mcp;
    Ok(Arc::new(builder.build().map_err(|e| e.to_string())?))
}

#[cfg(not(feature = "openai"))]
fn model_agent(_: &ModelArgs, _: &Mcp) -> Result<Arc<dyn Agent>, String> {
    Err("this turnstile was built without the `openai` feature; rebuild with it".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_choices_include_the_model() {
        assert_eq!("openai".parse(), Ok(AgentChoice::OpenAi));
        assert_eq!("echo".parse(), Ok(AgentChoice::Builtin(AgentKind::Echo)));
        let err = "gpt".parse::<AgentChoice>().unwrap_err();
        assert!(err.contains("expected mock, echo or openai"), "{err}");
    }

    #[test]
    fn the_model_agent_needs_a_url_and_a_model() {
        let err = build_agent(
            AgentChoice::OpenAi,
            0,
            1,
            &ModelArgs::default(),
            &Mcp::default(),
        )
        .err()
        .unwrap();
        assert!(
            err.contains("--base-url") || err.contains("openai"),
            "{err}"
        );
    }

    #[test]
    fn agents_round_trip_or_say_what_is_expected() {
        for kind in [AgentKind::Mock, AgentKind::Echo] {
            assert_eq!(kind.as_str().parse::<AgentKind>(), Ok(kind));
        }
        let err = "gpt".parse::<AgentKind>().unwrap_err();
        assert!(err.contains("expected mock or echo"), "{err}");
    }
}
