//! `turnstile chat --url URL [--token-env VAR] USER/SESSION`: the same conversation as the
//! embedded mode, with a running `turnstile serve` instead of a store of one's own. It opens
//! with the session's recent history (`GET …/events`), sends each line as a turn with
//! `Accept: text/event-stream` and prints the reply's chunks as they come; Ctrl-C during a
//! reply posts `…/interrupt` (the partial reply is kept by the server, marked interrupted).
//! The token is read from an environment variable, never from the command line (where other
//! users of the machine could read it). Nothing is sent anywhere but the given URL: no proxy
//! from the environment, no redirects.
//!
//! With `--api openai` the same conversation goes through OpenAI's routes instead
//! (`remote/openai.rs`): the session is a conversation, each line a streamed response, Ctrl-C
//! its `cancel`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION};
use reqwest::{Client, Method, RequestBuilder, Response, StatusCode, Url};
use serde_json::{json, Value};
use tokio::io::AsyncBufRead;
use turnstile::SessionKey;

use super::Typed;
use crate::cli::answer_body::{body_of, MAX_ANSWER_BYTES};
use crate::cli::sse::SseReader;
use crate::cli::visible::Visible;

mod openai;

/// Which of the server's APIs the conversation goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Api {
    /// turnstile's session routes (`/v1/sessions/{user}/{session}/…`).
    Turnstile,
    /// OpenAI's routes (`/v1/conversations`, `/v1/responses`): the session is a conversation.
    Openai,
}

/// How long connecting to `serve` may take: a refused or black-holed address fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for an answer that is not a turn (history, interrupt).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a single turn's stream may take: above `serve`'s default request timeout (60 s),
/// so that the server's own `timeout` answer arrives first.
const TURN_TIMEOUT: Duration = Duration::from_secs(600);
/// The most history events shown on opening (`--history`): one page of the events API.
pub(super) const MAX_HISTORY: usize = 1000;

/// A session of a running `serve`, reached over HTTP.
pub(super) struct Remote {
    client: Client,
    /// The server's base URL (its path kept as a prefix).
    base: Url,
    /// The bearer token, when the server asks for one.
    token: Option<String>,
    key: SessionKey,
    api: Api,
    /// With `--api openai`: the conversation the turns go to, once it is known to exist (a new
    /// one is made by the first response, whose id it then takes).
    conversation: parking_lot::Mutex<Option<String>>,
}

/// What one event of a streamed reply says, whichever API sent it.
#[derive(Debug, PartialEq)]
pub(super) enum Said {
    /// Reply text to print.
    Chunk(String),
    /// The reply began: the id an interrupt names (OpenAI's response id) and the conversation
    /// it runs in.
    Began {
        id: String,
        conversation: Option<String>,
    },
    /// The reply ended: what to print after it.
    Ended(String),
    /// The turn failed, or the stream reported an error: the message.
    Failed(String),
    /// Nothing to show.
    Nothing,
}

impl Remote {
    /// Checks the URL (and with `--api openai` the session id) and reads the token from
    /// `token_env` (when given).
    pub(super) fn new(
        url: &str,
        token_env: Option<&str>,
        key: SessionKey,
        api: Api,
    ) -> Result<Self, String> {
        if api == Api::Openai {
            openai::check_conversation(key.session_id())?;
        }
        let base = Url::parse(url).map_err(|e| format!("--url {url:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(format!(
                "--url {url:?}: give an http:// or https:// address"
            ));
        }
        let token = match token_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                format!("--token-env {var}: the variable {var} is not set (or not UTF-8)")
            })?),
            None => None,
        };
        let client = Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let conversation = parking_lot::Mutex::new(None);
        Ok(Self {
            client,
            base,
            token,
            key,
            api,
            conversation,
        })
    }

    /// `…/v1/sessions/{user}/{session}` followed by `tail`, each part encoded as a segment.
    fn url(&self, tail: &[&str]) -> Url {
        let session = ["sessions", self.key.user_id(), self.key.session_id()];
        self.api_url(session.iter().chain(tail))
    }

    /// The server's base URL followed by `v1` and `segments`, each encoded as a segment.
    fn api_url<'a>(&self, segments: impl IntoIterator<Item = &'a &'a str>) -> Url {
        let mut url = self.base.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push("v1").extend(segments);
        }
        url
    }

    fn request(&self, method: Method, url: Url) -> RequestBuilder {
        let request = self.client.request(method, url);
        match &self.token {
            Some(token) => request.header(AUTHORIZATION, format!("Bearer {token}")),
            None => request,
        }
    }

    /// The transcript lines of the session's newest `limit` entries, under a heading (none for
    /// a new session).
    async fn history(&self, limit: usize) -> Result<Vec<String>, String> {
        if self.api == Api::Openai {
            return openai::history(self, limit).await;
        }
        let (total, events) = self.events(limit).await?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let heading = format!("--- the last {} of {total} events ---", events.len());
        Ok(std::iter::once(heading)
            .chain(events.iter().filter_map(shown))
            .collect())
    }

    /// The session's newest `limit` events (none for a new session).
    async fn events(&self, limit: usize) -> Result<(u64, Vec<Value>), String> {
        let answer = self
            .request(Method::GET, self.url(&[]))
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| unreachable(&self.base, &e))?;
        if answer.status() == StatusCode::NOT_FOUND {
            return Ok((0, Vec::new()));
        }
        let view = json_of(answer).await?;
        let total = view["meta"]["events"].as_u64().unwrap_or(0);
        if total == 0 || limit == 0 {
            return Ok((total, Vec::new()));
        }
        let from = total.saturating_sub(limit as u64 - 1).max(1);
        let mut url = self.url(&["events"]);
        url.query_pairs_mut()
            .append_pair("from", &from.to_string())
            .append_pair("limit", &limit.to_string());
        let page = self
            .request(Method::GET, url)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| unreachable(&self.base, &e))?;
        let page = json_of(page).await?;
        let events = page["events"].as_array().cloned().unwrap_or_default();
        Ok((total, events))
    }

    /// The request that runs `text` as a turn, answered with server-sent events.
    fn turn_request(&self, text: &str) -> RequestBuilder {
        let request = match self.api {
            Api::Turnstile => self
                .request(Method::POST, self.url(&["turns"]))
                .json(&json!({ "input": text })),
            Api::Openai => openai::response_request(self, text),
        };
        request
            .header(ACCEPT, "text/event-stream")
            .timeout(TURN_TIMEOUT)
    }

    /// What one event of a streamed reply says.
    fn said(&self, name: &str, data: &Value) -> Said {
        match self.api {
            Api::Openai => openai::said(name, data),
            Api::Turnstile => match name {
                "chunk" => Said::Chunk(data["text"].as_str().unwrap_or_default().to_owned()),
                "outcome" => Said::Ended(ending(data)),
                "error" => Said::Failed(
                    data["error"]["message"]
                        .as_str()
                        .unwrap_or("failed")
                        .to_owned(),
                ),
                _ => Said::Nothing,
            },
        }
    }

    /// Asks the server to interrupt the running turn — with `--api openai`, the response
    /// `running` names — in the background: the reply's stream goes on and ends with the
    /// interrupted outcome.
    fn interrupt(&self, running: Option<&str>) {
        let url = match (self.api, running) {
            (Api::Turnstile, _) => self.url(&["interrupt"]),
            (Api::Openai, Some(id)) => openai::cancel_url(self, id),
            // Not begun yet: the caller cancels once it has the id.
            (Api::Openai, None) => return,
        };
        let request = self.request(Method::POST, url).timeout(REQUEST_TIMEOUT);
        tokio::spawn(async move {
            if let Err(err) = request.send().await {
                tracing::warn!(error = %err, "the interrupt did not reach the server");
            }
        });
    }
}

/// Runs the conversation with `remote` until Ctrl-D or `/quit`.
pub(super) async fn run(
    remote: Remote,
    history: usize,
    interrupts: impl Stream<Item = ()> + Unpin,
) -> Result<ExitCode, String> {
    let stdin = Typed::new(tokio::io::BufReader::new(tokio::io::stdin()), true);
    converse(&remote, history, stdin, &mut std::io::stdout(), interrupts).await?;
    Ok(ExitCode::SUCCESS)
}

/// The conversation: the recent history, then a turn per line read from `input` (lines typed
/// during a reply are answered after it, in order).
async fn converse<R, W>(
    remote: &Remote,
    history: usize,
    mut input: Typed<R>,
    out: &mut W,
    mut interrupts: impl Stream<Item = ()> + Unpin,
) -> Result<(), String>
where
    R: AsyncBufRead + Unpin,
    W: Write,
{
    // Replies, stored history and the server's messages are untrusted text: their control
    // characters are shown, never obeyed.
    let out = &mut Visible::new(out);
    let io = |e: std::io::Error| format!("terminal: {e}");
    let lines = remote.history(history).await?;
    let key = &remote.key;
    let through = match remote.api {
        Api::Turnstile => "",
        Api::Openai => " (OpenAI's routes)",
    };
    writeln!(
        out,
        "chatting on {key} at {}{through}; Ctrl-C interrupts a reply, Ctrl-D or /quit leaves",
        remote.base
    )
    .map_err(io)?;
    if !lines.is_empty() {
        for line in &lines {
            writeln!(out, "{line}").map_err(io)?;
        }
        writeln!(out, "---").map_err(io)?;
    }
    loop {
        write!(out, "you> ").map_err(io)?;
        out.flush().map_err(io)?;
        let line = tokio::select! {
            biased;
            line = input.next() => line.map_err(io)?,
            Some(()) = interrupts.next() => {
                writeln!(out, "\n(Ctrl-C interrupts a reply; Ctrl-D or /quit leaves)").map_err(io)?;
                continue;
            }
        };
        let Some(line) = line else {
            writeln!(out).map_err(io)?;
            return Ok(());
        };
        if !line.echoed {
            writeln!(out, "{}", line.text).map_err(io)?;
        }
        match line.text.trim() {
            "" => continue,
            "/quit" => return Ok(()),
            text => turn(remote, text, out, &mut interrupts, &mut input)
                .await
                .map_err(io)?,
        }
    }
}

/// One stored event as a transcript line: what the user and the agent said, and failures.
fn shown(event: &Value) -> Option<String> {
    let kind = &event["kind"];
    let text = kind["text"].as_str().unwrap_or_default();
    match kind["type"].as_str()? {
        "user_input" => Some(format!("you> {text}")),
        "agent_output" => Some(match kind["status"]["status"].as_str() {
            Some("interrupted") => format!("{text} [interrupted]"),
            Some("incomplete") => format!("{text} [incomplete]"),
            Some("refused") => format!("[refused] {text}"),
            _ => text.to_owned(),
        }),
        "turn_failed" => Some(format!(
            "[turn failed: {}]",
            kind["reason"].as_str().unwrap_or_default()
        )),
        "context_cleared" => Some("[context cleared]".to_owned()),
        _ => None,
    }
}

/// One turn over server-sent events: chunks as they come, Ctrl-C posts an interrupt; lines
/// typed meanwhile are kept (unechoed) for after it.
async fn turn<W: Write, R: AsyncBufRead + Unpin>(
    remote: &Remote,
    text: &str,
    out: &mut W,
    interrupts: &mut (impl Stream<Item = ()> + Unpin),
    typed: &mut Typed<R>,
) -> std::io::Result<()> {
    let _quiet = typed.quiet();
    let sent = remote.turn_request(text).send();
    let mut sent = std::pin::pin!(sent);
    let answer = loop {
        tokio::select! {
            answer = &mut sent => break answer,
            Some(()) = interrupts.next() => return writeln!(out, "[not sent]"),
            () = typed.keep_early() => {}
        }
    };
    let answer = match answer {
        Ok(answer) if answer.status().is_success() => answer,
        Ok(refused) => {
            let message = json_of(refused).await.err().unwrap_or_default();
            return writeln!(out, "error: {message}");
        }
        Err(err) => return writeln!(out, "error: {}", unreachable(&remote.base, &err)),
    };
    let mut body = answer.bytes_stream();
    let mut reader = SseReader::default();
    // The response an interrupt names (OpenAI's routes), and whether one was asked for before
    // the reply began.
    let mut running: Option<String> = None;
    let mut interrupt_asked = false;
    loop {
        tokio::select! {
            chunk = body.next() => {
                let events = match chunk {
                    Some(Ok(bytes)) => reader.push(&bytes),
                    Some(Err(err)) => return writeln!(out, "\nerror: the reply stream broke off: {err}"),
                    None => return writeln!(out, "\nerror: the reply stream ended without an outcome"),
                };
                let events = match events {
                    Ok(events) => events,
                    Err(err) => return writeln!(out, "\nerror: {err}"),
                };
                for event in events {
                    let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                    match remote.said(&event.name, &data) {
                        Said::Chunk(text) => {
                            write!(out, "{text}")?;
                            out.flush()?;
                        }
                        Said::Began { id, conversation } => {
                            if let Some(note) = remote.adopt(conversation) {
                                writeln!(out, "{note}")?;
                            }
                            if interrupt_asked {
                                remote.interrupt(Some(&id));
                            }
                            running = Some(id);
                        }
                        Said::Ended(after) => return writeln!(out, "{after}"),
                        Said::Failed(message) => return writeln!(out, "\nerror: {message}"),
                        Said::Nothing => {}
                    }
                }
            }
            Some(()) = interrupts.next() => {
                interrupt_asked = true;
                remote.interrupt(running.as_deref());
            }
            () = typed.keep_early() => {}
        }
    }
}

/// What follows a reply: nothing, or how it ended.
fn ending(outcome: &Value) -> String {
    if outcome["outcome"] == "refused" {
        // A refusal is not streamed: it is the outcome's output.
        let refusal = outcome["output"].as_str().unwrap_or_default();
        return format!("[refused] {refusal}");
    }
    after_reply(outcome["outcome"].as_str(), outcome["reason"].as_str())
}

/// What follows a reply that ended `how` (`completed`, `interrupted`, `superseded`, `merged`)
/// for `reason`: nothing, or how it ended.
fn after_reply(how: Option<&str>, reason: Option<&str>) -> String {
    match (how, reason) {
        (Some("interrupted"), Some("reply_limit")) => {
            "\n[cut short: the reply reached its limit]".into()
        }
        (Some("interrupted"), _) => "\n[interrupted]".into(),
        (Some("incomplete"), Some("max_tokens")) => {
            "\n[incomplete: the model reached its token limit]".into()
        }
        (Some("incomplete"), _) => "\n[incomplete: a content filter stopped the model]".into(),
        (Some("superseded"), _) => "[superseded by a newer message]".into(),
        (Some("merged"), _) => "[merged into the next turn]".into(),
        _ => String::new(),
    }
}

/// The JSON body of a 2xx answer, or the server's own error message.
async fn json_of(answer: Response) -> Result<Value, String> {
    let status = answer.status();
    let body: Value = match body_of(answer, MAX_ANSWER_BYTES).await {
        Ok(body) => serde_json::from_slice(&body).unwrap_or(Value::Null),
        Err(error) if status.is_success() => return Err(error),
        // Refused: the status says what happened even without a readable body.
        Err(_) => Value::Null,
    };
    if status.is_success() {
        return Ok(body);
    }
    let message = body["error"]["message"]
        .as_str()
        .map_or_else(|| format!("the server answered {status}"), str::to_owned);
    Err(match status {
        StatusCode::UNAUTHORIZED => {
            format!("{message} (401: check the token in --token-env)")
        }
        _ => format!("{message} ({})", status.as_u16()),
    })
}

fn unreachable(base: &Url, err: &reqwest::Error) -> String {
    format!("cannot reach turnstile serve at {base}: {err}")
}

#[cfg(test)]
mod tests;
