//! `turnstile chat USER/SESSION`: a terminal conversation with one session, through the same
//! runtime and store as `serve`. Replies stream as they come; Ctrl-C interrupts the reply (the
//! partial reply stays in the history, marked interrupted), not the program; Ctrl-D or `/quit`
//! leaves, after the session is flushed.
//!
//! With `--url`, the conversation goes to a running `turnstile serve` instead (`chat/remote.rs`):
//! the store stays the server's, and so do the agent and its settings.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use futures::{Stream, StreamExt};
use tokio::io::AsyncBufRead;
use turnstile::backend::{open_store, StoreUrl};
use turnstile::state::{IncompleteReason, InterruptReason};
use turnstile::{CallOptions, OutcomeKind, Runtime, SessionKey, StreamEvent};

use super::agent_arg::{build_agent, AgentChoice, ModelArgs};
use super::limits_arg::TurnLimitArgs;
use super::mcp_arg::{self, McpArgs};

#[cfg(feature = "http")]
mod remote;
mod typed;

use super::visible::Visible;
use typed::Typed;

/// Options of `turnstile chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The session, as `USER/SESSION`.
    session: String,
    /// Talk to a running `turnstile serve` at this URL (`http://127.0.0.1:8080`) over HTTP and
    /// server-sent events, instead of opening a store: the server's store, agent and settings
    /// are used, and the store, agent and model options here are refused.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "URL", conflicts_with_all = ["store", "agent", "latency", "chunks"])]
    url: Option<String>,
    /// With `--url`: the environment variable that holds the bearer token (never the token
    /// itself, which other users of the machine could read on the command line).
    #[cfg(feature = "http")]
    #[arg(long, value_name = "VAR", requires = "url")]
    token_env: Option<String>,
    /// With `--url`: how many of the session's newest events to show on opening (0..=1000).
    #[cfg(feature = "http")]
    #[arg(long, value_name = "N", default_value_t = 20, requires = "url",
        value_parser = clap::value_parser!(u16).range(0..=1000))]
    history: u16,
    /// With `--url`: the server's API the conversation goes through: `turnstile` (its session
    /// routes) or `openai` (OpenAI's conversations and responses; the session must then be a
    /// conversation id: 1–64 letters, digits, `_` or `-`).
    #[cfg(feature = "http")]
    #[arg(long, value_enum, default_value = "turnstile", requires = "url")]
    api: remote::Api,
    /// The store, as for `serve` (`file`, `file:PATH`, `memory`, `redis://…`,
    /// `redis+cluster://…`, `postgres://…`).
    #[arg(long, default_value = "file")]
    store: StoreUrl,
    /// The agent: `openai` (a model; see the model options), `mock` or `echo`.
    #[arg(long, default_value = "openai")]
    agent: AgentChoice,
    /// Mock agent latency per turn, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency: u64,
    /// Chunks the mock agent streams per reply.
    #[arg(long, default_value_t = 4)]
    chunks: usize,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    mcp: McpArgs,
    #[command(flatten)]
    limits: TurnLimitArgs,
}

/// Runs the conversation until Ctrl-D or `/quit`, then flushes the session.
pub async fn run(args: ChatArgs) -> Result<ExitCode, String> {
    let key = parse_key(&args.session)?;
    #[cfg(feature = "http")]
    if let Some(url) = &args.url {
        let remote = remote::Remote::new(url, args.token_env.as_deref(), key, args.api)?;
        let history = usize::from(args.history).min(remote::MAX_HISTORY);
        return remote::run(remote, history, interrupts()?).await;
    }
    let mcp = mcp_arg::connect(&args.mcp, args.agent == AgentChoice::OpenAi).await?;
    let talked = chat(&args, &key, &mcp).await;
    mcp.shutdown().await;
    talked
}

/// The conversation on a runtime with the agent and `mcp`'s tools.
async fn chat(args: &ChatArgs, key: &SessionKey, mcp: &mcp_arg::Mcp) -> Result<ExitCode, String> {
    let agent = build_agent(args.agent, args.latency, args.chunks, &args.model, mcp)?;
    let opened = open_store(&args.store).await.map_err(|e| e.to_string())?;
    let runtime = args
        .limits
        .apply(
            Runtime::builder()
                .agent_arc(agent)
                .store_arc(opened.store().clone()),
        )
        .build()
        .map_err(|e| e.to_string())?;
    let interrupts = interrupts()?;
    let stdin = Typed::new(tokio::io::BufReader::new(tokio::io::stdin()), true);
    let talked = converse(&runtime, key, stdin, &mut std::io::stdout(), interrupts).await;
    let report = runtime.shutdown().await;
    talked?;
    if report.left > 0 {
        return Err(format!("session {key} could not be flushed to the store"));
    }
    Ok(ExitCode::SUCCESS)
}

/// `USER/SESSION` as a key.
fn parse_key(text: &str) -> Result<SessionKey, String> {
    let (user, session) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not USER/SESSION"))?;
    SessionKey::new(user, session).map_err(|e| e.to_string())
}

/// The conversation: reads lines from `input`, runs each as a turn, writes the streamed reply
/// to `out`; each item of `interrupts` (a Ctrl-C) interrupts the running turn, or at the prompt
/// reminds how to leave. Lines typed during a reply are answered after it, in order.
pub(crate) async fn converse<R, W>(
    runtime: &Runtime,
    key: &SessionKey,
    mut input: Typed<R>,
    out: &mut W,
    mut interrupts: impl Stream<Item = ()> + Unpin,
) -> Result<(), String>
where
    R: AsyncBufRead + Unpin,
    W: Write,
{
    // Replies are untrusted text: their control characters are shown, never obeyed.
    let out = &mut Visible::new(out);
    let io = |e: std::io::Error| format!("terminal: {e}");
    writeln!(
        out,
        "chatting on {key}; Ctrl-C interrupts a reply, Ctrl-D or /quit leaves"
    )
    .map_err(io)?;
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
            text => turn(runtime, key, text, out, &mut interrupts, &mut input)
                .await
                .map_err(io)?,
        }
    }
}

/// One turn: streams the reply to `out` until its outcome, interrupting it on Ctrl-C; lines
/// typed meanwhile are kept (unechoed) for after it.
async fn turn<W: Write, R: AsyncBufRead + Unpin>(
    runtime: &Runtime,
    key: &SessionKey,
    text: &str,
    out: &mut W,
    interrupts: &mut (impl Stream<Item = ()> + Unpin),
    typed: &mut Typed<R>,
) -> std::io::Result<()> {
    let _quiet = typed.quiet();
    // Dropping the stream abandons the turn even if it has not started yet, which is what a
    // Ctrl-C pressed before the session picked the message up needs.
    let options = CallOptions::default().with_cancel_on_drop();
    let mut stream = match runtime.call_streaming(key, text, options).await {
        Ok(stream) => stream,
        Err(err) => return writeln!(out, "error: {err}"),
    };
    loop {
        tokio::select! {
            event = stream.next() => match event {
                Some(StreamEvent::Chunk(chunk)) => {
                    write!(out, "{chunk}")?;
                    out.flush()?;
                }
                Some(StreamEvent::Outcome(Ok(outcome))) => {
                    return match outcome.kind {
                        OutcomeKind::Interrupted(InterruptReason::ReplyLimit) => {
                            writeln!(out, "\n[cut short: the reply reached --max-reply-bytes]")
                        }
                        OutcomeKind::Interrupted(_) => writeln!(out, "\n[interrupted]"),
                        OutcomeKind::Incomplete(IncompleteReason::MaxTokens) => {
                            writeln!(out, "\n[incomplete: the model reached its token limit]")
                        }
                        OutcomeKind::Incomplete(_) => {
                            writeln!(out, "\n[incomplete: a content filter stopped the model]")
                        }
                        // A refusal is not streamed: it is the outcome's output.
                        OutcomeKind::Refused => writeln!(out, "[refused] {}", outcome.output),
                        _ => writeln!(out),
                    };
                }
                Some(StreamEvent::Outcome(Err(err))) => return writeln!(out, "\nerror: {err}"),
                // The terminal shows the reply; tool calls are in the session's history.
                Some(_) => {}
                None => return writeln!(out),
            },
            Some(()) = interrupts.next() => {
                if !runtime.interrupt(key) {
                    drop(stream);
                    return writeln!(out, "\n[interrupted]");
                }
            }
            () = typed.keep_early() => {}
        }
    }
}

/// Ctrl-C presses, as a stream. Installing the handler replaces the default (which would end
/// the program).
#[cfg(unix)]
fn interrupts() -> Result<impl Stream<Item = ()> + Unpin, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let sigint =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot listen for Ctrl-C: {e}"))?;
    Ok(Box::pin(futures::stream::unfold(
        sigint,
        |mut sigint| async move { sigint.recv().await.map(|()| ((), sigint)) },
    )))
}

/// Ctrl-C presses, as a stream.
#[cfg(not(unix))]
fn interrupts() -> Result<impl Stream<Item = ()> + Unpin, String> {
    Ok(Box::pin(futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok().map(|()| ((), ()))
    })))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use parking_lot::Mutex;
    use tokio::io::AsyncWriteExt;
    use turnstile::state::{EventKind, OutputStatus};
    use turnstile::{Agent, AgentError, InMemoryStore, Store, TurnContext};

    use super::*;

    /// Streams `thinking…`, then waits until the turn is interrupted.
    struct Endless;

    #[async_trait]
    impl Agent for Endless {
        async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
            turn.emit("thinking…").await;
            turn.cancellation().cancelled().await;
            Ok(String::new())
        }
    }

    /// A terminal's screen: what was written so far.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock()).into_owned()
        }

        async fn shows(&self, what: &str) {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            while !self.text().contains(what) {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the screen never showed {what:?}:\n{}",
                    self.text()
                );
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }

    #[test]
    fn keys_are_user_slash_session() {
        let key = parse_key("ada/chat").unwrap();
        assert_eq!((key.user_id(), key.session_id()), ("ada", "chat"));
        assert!(parse_key("no-slash").unwrap_err().contains("USER/SESSION"));
    }

    /// A chat with the `Endless` agent on `session`: the store, the keyboard, the Ctrl-C key,
    /// the screen and the running conversation.
    struct Chat {
        store: Arc<dyn Store>,
        key: SessionKey,
        keyboard: tokio::io::DuplexStream,
        press: tokio::sync::mpsc::UnboundedSender<()>,
        screen: Screen,
        talk: tokio::task::JoinHandle<Result<(), String>>,
    }

    /// Replies with escape sequences that would retitle the window and clear the screen, in
    /// two chunks.
    struct Hostile;

    #[async_trait]
    impl Agent for Hostile {
        async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
            turn.emit("\u{1b}]0;pwned\u{7}").await;
            turn.emit("\u{1b}[2J\u{1b}[Hgone\u{9b}").await;
            Ok("\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[Hgone\u{9b}".into())
        }
    }

    fn chat(session: &str) -> Chat {
        chat_with(session, Endless)
    }

    fn chat_with(session: &str, agent: impl Agent + 'static) -> Chat {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let runtime = Runtime::builder()
            .agent(agent)
            .store_arc(store.clone())
            .build()
            .unwrap();
        let key = parse_key(session).unwrap();
        let (keyboard, stdin) = tokio::io::duplex(1024);
        let (press, presses) = tokio::sync::mpsc::unbounded_channel::<()>();
        let presses = tokio_stream_of(presses);
        let screen = Screen::default();
        let talk = {
            let (key, mut screen) = (key.clone(), screen.clone());
            tokio::spawn(async move {
                let stdin = Typed::new(tokio::io::BufReader::new(stdin), false);
                converse(&runtime, &key, stdin, &mut screen, presses).await
            })
        };
        Chat {
            store,
            key,
            keyboard,
            press,
            screen,
            talk,
        }
    }

    #[tokio::test]
    async fn ctrl_c_interrupts_the_reply_and_the_conversation_goes_on() {
        let Chat {
            store,
            key,
            mut keyboard,
            press,
            screen,
            talk,
        } = chat("ada/chat");
        keyboard.write_all(b"hello\n").await.unwrap();
        screen.shows("thinking…").await;
        press.send(()).unwrap();
        screen.shows("[interrupted]").await;
        screen.shows("[interrupted]\nyou> ").await;
        quit(&mut keyboard, talk).await;
        let events = store.read_events(&key, 1, usize::MAX).await.unwrap();
        let interrupted = events.iter().any(|e| {
            matches!(&e.kind, EventKind::AgentOutput { text, status, .. }
                if text == "thinking…"
                    && *status == OutputStatus::Interrupted(InterruptReason::Requested))
        });
        assert!(interrupted, "{events:?}");
    }

    #[tokio::test]
    async fn a_line_typed_during_a_reply_is_answered_after_it_at_its_own_prompt() {
        let Chat {
            store,
            key,
            mut keyboard,
            press,
            screen,
            talk,
        } = chat("ada/typed");
        keyboard.write_all(b"first\n").await.unwrap();
        screen.shows("thinking…").await;
        keyboard.write_all(b"typed meanwhile\n").await.unwrap();
        // Nothing of it shows inside the reply; after it, at its own prompt, and it runs.
        press.send(()).unwrap();
        screen
            .shows("thinking…\n[interrupted]\nyou> typed meanwhile\nthinking…")
            .await;
        press.send(()).unwrap();
        screen.shows("thinking…\n[interrupted]\nyou> ").await;
        quit(&mut keyboard, talk).await;
        let inputs: Vec<String> = store
            .read_events(&key, 1, usize::MAX)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::UserInput { text, .. } => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(inputs, ["first", "typed meanwhile"]);
    }

    #[tokio::test]
    async fn a_reply_s_escape_sequences_are_shown_not_obeyed() {
        let Chat {
            mut keyboard,
            screen,
            talk,
            ..
        } = chat_with("ada/hostile", Hostile);
        keyboard.write_all(b"hello \x1b[31mred\n").await.unwrap();
        screen
            .shows("^[]0;pwned^G^[[2J^[[Hgone\\u{9b}\nyou> ")
            .await;
        quit(&mut keyboard, talk).await;
        let shown = screen.0.lock().clone();
        assert!(
            !shown.iter().any(|b| matches!(b, 0x1b | 0x07)),
            "a control character reached the terminal: {:?}",
            screen.text()
        );
        assert!(!screen.text().contains('\u{9b}'), "{:?}", screen.text());
    }

    /// Types `/quit` and waits for the chat to end well.
    async fn quit(
        keyboard: &mut tokio::io::DuplexStream,
        talk: tokio::task::JoinHandle<Result<(), String>>,
    ) {
        keyboard.write_all(b"/quit\n").await.unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), talk)
            .await
            .expect("the chat ended")
            .unwrap()
            .unwrap();
    }

    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<()>,
    ) -> impl Stream<Item = ()> + Unpin {
        Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }
}
