//! [`OpenAiBuilder`]: the settings of an [`OpenAiAgent`], checked once when it is built.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::secrets::{shown_url, Secrets};
use super::tool::ToolSet;
use super::transport::{transport_detail, ApiKey, RetryPolicy, Transport};
use super::{OpenAiAgent, OpenAiError, Tool};
use crate::context::{render, MissingKey};

/// The variable the API key is read from unless another is named.
const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The longest wait for a response to start and then between two chunks: a model may think for
/// a while before its first token, but a minute of silence is a stalled server.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Retries of a request that failed before streaming (429, 5xx, connection errors): enough to
/// ride out a brief rate limit, few enough that a down server is reported within seconds.
const DEFAULT_MAX_RETRIES: u32 = 3;
/// The first backoff; it doubles per retry.
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(250);
/// The longest backoff, and the longest `Retry-After` honoured: a server that asks for longer is
/// reported at once rather than holding the turn (and the session's queue) for minutes.
const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(20);
/// Model requests per turn at most, the first included: each round of tool calls costs one, and
/// a model that loops on tools must not run up an unbounded bill.
const DEFAULT_MAX_TOOL_ROUNDS: usize = 8;
/// The longest a turn may take in the agent, all of it: requests, retries and their waits,
/// streaming and tools. A long answer from a slow model (4,000 tokens at 20 a second is 200 s)
/// after a few tool rounds fits; a model that drips tokens, or keeps a stream alive with empty
/// chunks, frees the session's queue within minutes instead of never (the attempt timeout only
/// bounds silence).
const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the API key comes from.
#[derive(Debug, Clone)]
enum KeySource {
    /// `OPENAI_API_KEY` if it is set, else no key (local servers need none).
    Default,
    /// This variable, which must be set.
    Env(String),
    /// This key.
    Value(ApiKey),
    /// No key.
    None,
}

/// Builds an [`OpenAiAgent`]; start with [`OpenAiAgent::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct OpenAiBuilder {
    base_url: String,
    model: String,
    key: KeySource,
    headers: Vec<(String, String)>,
    system_prompt: Option<String>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    tools: Vec<Arc<dyn Tool>>,
    #[cfg(feature = "mcp")]
    mcp: Option<crate::agent::McpTools>,
    max_tool_rounds: usize,
    timeout: Duration,
    turn_timeout: Duration,
    retry: RetryPolicy,
    failed_turns_in_context: bool,
}

/// Written by hand: the extra headers' values and the base URL's credentials and query are
/// secrets as much as the key, so only header names and the shown URL appear.
impl std::fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("OpenAiBuilder")
            .field("base_url", &shown_base(&self.base_url))
            .field("model", &self.model)
            .field("headers", &headers)
            .field("tools", &self.tools)
            .field("max_tool_rounds", &self.max_tool_rounds)
            .field("timeout", &self.timeout)
            .field("turn_timeout", &self.turn_timeout)
            .finish_non_exhaustive()
    }
}

/// `base` without credentials, query or fragment, for messages; a URL that does not parse is
/// not shown at all (it may be anything, a key pasted in the wrong place included).
fn shown_base(base: &str) -> String {
    reqwest::Url::parse(base).map_or_else(|_| "(not a URL)".to_owned(), |u| shown_url(&u))
}

impl std::fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tool({})", self.name())
    }
}

impl OpenAiAgent {
    /// Starts building an agent for `model` at `base_url` (the part before `/chat/completions`,
    /// such as `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            base_url: base_url.into(),
            model: model.into(),
            key: KeySource::Default,
            headers: Vec::new(),
            system_prompt: None,
            temperature: None,
            max_tokens: None,
            tools: Vec::new(),
            #[cfg(feature = "mcp")]
            mcp: None,
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            timeout: DEFAULT_TIMEOUT,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            failed_turns_in_context: false,
            retry: RetryPolicy {
                max_retries: DEFAULT_MAX_RETRIES,
                base: DEFAULT_RETRY_BACKOFF,
                max_wait: DEFAULT_MAX_RETRY_WAIT,
            },
        }
    }
}

impl OpenAiBuilder {
    /// Reads the API key from environment variable `var` when building; building fails if it is
    /// not set. Without this, `OPENAI_API_KEY` is used if set.
    pub fn with_api_key_env(mut self, var: impl Into<String>) -> Self {
        self.key = KeySource::Env(var.into());
        self
    }

    /// Uses this API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.key = KeySource::Value(ApiKey(key.into()));
        self
    }

    /// Sends no API key, even if `OPENAI_API_KEY` is set.
    pub fn without_api_key(mut self) -> Self {
        self.key = KeySource::None;
        self
    }

    /// Sends this header with every request (a gateway's routing or billing header).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The system prompt: a template whose `{scope:key}` placeholders are filled from the
    /// session's state each turn (missing keys render empty; see [`crate::context::render`]).
    pub fn with_system_prompt(mut self, template: impl Into<String>) -> Self {
        self.system_prompt = Some(template.into());
        self
    }

    /// The sampling temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The most tokens per model response.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Offers `tool` to the model.
    pub fn with_tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Offers the tools of these MCP servers too, after the ones given with
    /// [`with_tool`](Self::with_tool); a name both offer is refused by [`build`](Self::build).
    /// The list is read again each turn, so a server's new tools reach the next turn (one
    /// whose name is taken by now is left out and logged).
    #[cfg(feature = "mcp")]
    pub fn with_mcp(mut self, tools: crate::agent::McpTools) -> Self {
        self.mcp = Some(tools);
        self
    }

    /// Model requests per turn at most (default 8); the last one is sent with
    /// `tool_choice: none`, so that the model answers in words.
    pub fn with_max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds.max(1);
        self
    }

    /// The longest wait for one attempt's response to start, and then between two chunks
    /// (default 60 s): the bound on a silent model.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a turn may take in the agent, everything included: requests, retries and
    /// their waits, streaming and tools (default 300 s). Past it the
    /// turn fails as a model timeout; a retry whose wait would pass it is not made.
    pub fn with_turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = timeout;
        self
    }

    /// Sends the inputs of failed turns in the history to the model as user messages. By
    /// default they are left out, with the `turn_failed` event: a question the model never
    /// answered, followed by the same question sent again, reads as asked twice.
    pub fn with_failed_turns_in_context(mut self, include: bool) -> Self {
        self.failed_turns_in_context = include;
        self
    }

    /// Retries before streaming, the first backoff (doubling per retry, with jitter), and the
    /// longest backoff or `Retry-After` honoured (defaults: 3, 250 ms, 20 s).
    pub fn with_retries(mut self, max_retries: u32, backoff: Duration, max_wait: Duration) -> Self {
        self.retry = RetryPolicy {
            max_retries,
            base: backoff,
            max_wait,
        };
        self
    }

    /// Checks the settings, reads the API key and builds the HTTP client.
    pub fn build(self) -> Result<OpenAiAgent, OpenAiError> {
        let base = reqwest::Url::parse(&self.base_url)
            .map_err(|e| OpenAiError::Config(format!("the base URL does not parse: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(OpenAiError::Config(format!(
                "base URL {} must start with http:// or https://",
                shown_url(&base)
            )));
        }
        if self.timeout.is_zero() || self.turn_timeout.is_zero() {
            return Err(OpenAiError::Config(
                "the timeout and the turn timeout must be positive".into(),
            ));
        }
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let endpoint = reqwest::Url::parse(&url)
            .map_err(|e| OpenAiError::Config(format!("the endpoint does not parse: {e}")))?;
        let shown = shown_url(&endpoint);
        let api_key = match self.key {
            KeySource::Default => std::env::var(DEFAULT_API_KEY_ENV).ok().map(ApiKey),
            KeySource::Env(var) => match std::env::var(&var) {
                Ok(key) => Some(ApiKey(key)),
                Err(_) => return Err(OpenAiError::MissingApiKey { var }),
            },
            KeySource::Value(key) => Some(key),
            KeySource::None => None,
        };
        let headers = header_map(&self.headers)?;
        let secrets = Secrets::new(api_key.as_ref().map(|k| k.0.as_str()), &headers, &endpoint);
        if let Some(template) = &self.system_prompt {
            render(template, |_| None, MissingKey::Empty)?;
        }
        check_tool_names(&self.tools)?;
        #[cfg(feature = "mcp")]
        if let Some(mcp) = &self.mcp {
            super::offer::check_clashes(&self.tools, mcp)?;
        }
        // No redirects: a `Location` elsewhere would take the conversation and the extra
        // headers (a gateway's key among them; reqwest strips only `Authorization` on a hop to
        // another host) wherever the server says. A 3xx is refused as the answer it is.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OpenAiError::Config(format!("HTTP client: {}", transport_detail(e))))?;
        Ok(OpenAiAgent {
            transport: Transport {
                client,
                url,
                shown,
                api_key,
                secrets,
                headers,
                timeout: self.timeout,
                retry: self.retry,
            },
            model: self.model,
            system_prompt: self.system_prompt,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            library: Arc::new(ToolSet::new(self.tools)),
            #[cfg(feature = "mcp")]
            mcp: self.mcp.map(super::offer::McpOffer::new),
            max_tool_rounds: self.max_tool_rounds,
            turn_timeout: self.turn_timeout,
            failed_turns_in_context: self.failed_turns_in_context,
        })
    }
}

fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, OpenAiError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| OpenAiError::Config(format!("{name:?} is not a valid header name")))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| OpenAiError::Config(format!("the value of header {name} is not valid")))?;
        // Kept out of any `Debug` of the request and of HTTP/2's header compression tables.
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

fn check_tool_names(tools: &[Arc<dyn Tool>]) -> Result<(), OpenAiError> {
    let mut names = std::collections::HashSet::new();
    for tool in tools {
        if !names.insert(tool.name()) {
            return Err(OpenAiError::Config(format!(
                "two tools are named {:?}",
                tool.name()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_when_building() {
        let bad = |builder: OpenAiBuilder| builder.build().unwrap_err().to_string();
        assert!(bad(OpenAiAgent::builder("ftp://x", "m")).contains("http://"));
        assert!(bad(OpenAiAgent::builder("not a url", "m")).contains("base URL"));
        let missing = bad(OpenAiAgent::builder("http://127.0.0.1:1/v1", "m")
            .with_api_key_env("TURNSTILE_TEST_SURELY_UNSET_VARIABLE"));
        assert!(missing.contains("TURNSTILE_TEST_SURELY_UNSET_VARIABLE is not set"));
        let header =
            bad(OpenAiAgent::builder("http://127.0.0.1:1/v1", "m").with_header("a b", "c"));
        assert!(header.contains("header name"));
        let template = bad(OpenAiAgent::builder("http://127.0.0.1:1/v1", "m")
            .with_system_prompt("hello {user:name"));
        assert!(template.contains("system prompt"));
    }
}
