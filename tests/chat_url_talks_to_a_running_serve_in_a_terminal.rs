//! `turnstile chat --url URL --token-env VAR USER/SESSION` in a real terminal (util-linux
//! `script` gives it a pseudo-terminal) against a running `turnstile serve` that holds its file
//! store: it opens with the session's recent history, streams the reply to a new line, Ctrl-C
//! interrupts the reply (not the program) and the server keeps the partial reply marked
//! interrupted, a line typed while a reply streams is not echoed into it but answered after it
//! at its own prompt, and `/quit` leaves. A user token cannot open another user's session, and a
//! missing token variable is named. With `--api openai` the same goes through OpenAI's routes:
//! a new conversation is made by the first message and reopened by the id it shows. Escape
//! sequences and bidi controls in the stored history are shown as text, never sent to the
//! terminal.

#![cfg(all(feature = "http", unix))]

mod support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use support::cli::TURNSTILE;
use support::harness::*;
use support::http::ALICE;
use support::serve::{Serve, ServeStore};

/// The terminal's output so far, filled by a reader thread.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<String>>);

impl Screen {
    fn text(&self) -> String {
        self.0.lock().clone()
    }

    async fn shows(&self, what: &str, times: usize) {
        let awaited = format!("the terminal to show {what:?} {times} time(s)");
        eventually_ok(&awaited, Duration::from_millis(5), || async {
            let text = self.text();
            if text.matches(what).count() >= times {
                Ok(())
            } else {
                Err(text)
            }
        })
        .await;
    }
}

fn start(base: &str, session: &str) -> (Child, Screen) {
    start_with(base, session, "")
}

/// `chat --url` with `extra` arguments, in a pseudo-terminal.
fn start_with(base: &str, session: &str, extra: &str) -> (Child, Screen) {
    let command = format!("exec {TURNSTILE} chat --url {base} --token-env TT {extra} {session}");
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("RUST_LOG", "error")
        .env("TT", ALICE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("util-linux `script` runs");
    let screen = Screen::default();
    let mut out = child.stdout.take().expect("piped stdout");
    let filled = screen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            filled
                .0
                .lock()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, screen)
}

fn type_keys(child: &mut Child, keys: &[u8]) {
    let stdin = child.stdin.as_mut().expect("piped stdin");
    stdin.write_all(keys).expect("type into the terminal");
    stdin.flush().expect("flush the keys");
}

async fn events(serve: &Serve) -> Vec<Value> {
    let page: Value = reqwest::Client::new()
        .get(format!("{}/v1/sessions/alice/terminal/events", serve.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("read the events")
        .json()
        .await
        .expect("JSON");
    page["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_terminal_chat_with_serve_shows_history_streams_and_interrupts() {
    // 40 chunks over 2 s: a reply streams long enough to be interrupted.
    let serve = Serve::start(ServeStore::File, 2000, 40, &[]);
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/sessions/alice/terminal/turns", serve.base))
        .bearer_auth(ALICE)
        .json(&json!({"input": "remember the harbour"}))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);

    let (mut child, screen) = start(&serve.base, "alice/terminal");
    screen.shows("you> remember the harbour", 1).await;
    screen.shows("to: remember the harbour", 1).await;
    screen.shows("you> ", 2).await;

    type_keys(&mut child, b"hi\r");
    screen.shows("to: hi", 1).await;
    screen.shows("you> ", 3).await;

    type_keys(&mut child, b"a long one\r");
    screen.shows("mock re", 3).await;
    type_keys(&mut child, b"\x03");
    screen.shows("[interrupted]", 1).await;
    screen.shows("you> ", 4).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the program still runs"
    );

    // Typed while a reply streams: the terminal does not echo it into the reply; after the
    // reply it shows at its own prompt and is sent.
    type_keys(&mut child, b"a second long one\r");
    screen.shows("mock re", 4).await;
    type_keys(&mut child, b"typed meanwhile\r");
    screen.shows("you> typed meanwhile", 1).await;
    screen.shows("to: typed meanwhile", 1).await;
    let text = screen.text();
    let first = text.find("typed meanwhile").expect("shown");
    assert!(
        text[..first].ends_with("you> "),
        "the typed line showed inside the reply:\n{text}"
    );
    screen.shows("you> ", 6).await;
    quit(child, &screen).await;

    let events = events(&serve).await;
    let inputs: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"]["type"] == "user_input")
        .filter_map(|e| e["kind"]["text"].as_str())
        .collect();
    assert_eq!(
        inputs,
        [
            "remember the harbour",
            "hi",
            "a long one",
            "a second long one",
            "typed meanwhile"
        ]
    );
    let cut = events
        .iter()
        .find(|e| e["kind"]["status"]["status"] == "interrupted")
        .expect("the interrupted reply");
    assert_eq!(cut["seq"], 6, "{events:?}");
    let kept = cut["kind"]["text"].as_str().unwrap_or_default();
    assert!(
        kept.starts_with("mock re"),
        "the partial reply is kept: {kept:?}"
    );
}

#[tokio::test]
async fn escape_sequences_in_the_stored_history_are_shown_not_obeyed() {
    let serve = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let hostile = "title\u{1b}]0;pwned\u{7}\u{1b}[2Jcleared\u{202e}dlrow";
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/sessions/alice/terminal/turns", serve.base))
        .bearer_auth(ALICE)
        .json(&json!({ "input": hostile }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);

    let (child, screen) = start(&serve.base, "alice/terminal");
    // The message and the reply that repeats it, each with its controls shown as text.
    let shown = "title^[]0;pwned^G^[[2Jcleared\\u{202e}dlrow";
    screen.shows(shown, 2).await;
    screen.shows("you> ", 2).await;
    quit(child, &screen).await;
    let text = screen.text();
    assert!(
        !text.contains("\u{1b}]0;pwned")
            && !text.contains("\u{1b}[2J")
            && !text.contains('\u{202e}'),
        "a control sequence reached the terminal: {text:?}"
    );
}

#[tokio::test]
async fn another_users_session_and_a_missing_token_are_refused_clearly() {
    let serve = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let run = |session: &str, var: &str| {
        Command::new(TURNSTILE)
            .args(["chat", "--url", &serve.base, "--token-env", var, session])
            .env("TT", ALICE)
            .env_remove("TURNSTILE_NO_SUCH_VAR")
            .stdin(Stdio::null())
            .output()
            .expect("run turnstile chat")
    };
    let bob = run("bob/secret", "TT");
    assert!(!bob.status.success());
    let said = String::from_utf8_lossy(&bob.stderr);
    assert!(said.contains("only its own user's sessions"), "{said}");

    let missing = run("alice/x", "TURNSTILE_NO_SUCH_VAR");
    assert!(!missing.status.success());
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("TURNSTILE_NO_SUCH_VAR is not set"), "{said}");

    let both = Command::new(TURNSTILE)
        .args(["chat", "--url", &serve.base, "--store", "memory", "alice/x"])
        .stdin(Stdio::null())
        .output()
        .expect("run turnstile chat");
    assert!(!both.status.success());
    let said = String::from_utf8_lossy(&both.stderr);
    assert!(said.contains("cannot be used with"), "{said}");
}

async fn quit(mut child: Child, screen: &Screen) {
    type_keys(&mut child, b"/quit\r");
    let status = within(tokio::task::spawn_blocking(move || child.wait()))
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}\n{}", screen.text());
}

#[tokio::test]
async fn through_openais_routes_a_new_conversation_streams_is_cancelled_and_reopens() {
    let serve = Serve::start(ServeStore::Memory, 2000, 40, &[]);
    let (mut child, screen) = start_with(&serve.base, "alice/fresh", "--api openai");
    screen.shows("no conversation fresh yet", 1).await;
    screen.shows("you> ", 1).await;
    type_keys(&mut child, b"hello there\r");
    screen.shows("[a new conversation, conv_", 1).await;
    screen.shows("to: hello there", 1).await;
    screen.shows("you> ", 2).await;
    type_keys(&mut child, b"a long one\r");
    screen.shows("mock re", 2).await;
    type_keys(&mut child, b"\x03");
    screen.shows("[interrupted]", 1).await;
    screen.shows("you> ", 3).await;
    quit(child, &screen).await;

    let text = screen.text();
    let at = text
        .find("reopen it with alice/")
        .expect("the new id is shown")
        + 21;
    let conversation: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    assert!(conversation.starts_with("conv_"), "{text}");

    // Reopened by that id: the history shows both exchanges, the cancelled reply marked.
    let (child, again) = start_with(
        &serve.base,
        &format!("alice/{conversation}"),
        "--api openai",
    );
    again.shows("you> hello there", 1).await;
    again.shows("you> a long one", 1).await;
    again.shows("[interrupted]", 1).await;
    again.shows("you> ", 3).await;
    quit(child, &again).await;

    // A session id OpenAI's routes cannot name is refused before anything is sent.
    let refused = Command::new(TURNSTILE)
        .args([
            "chat",
            "--url",
            &serve.base,
            "--api",
            "openai",
            "alice/has.dot",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run turnstile chat");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("cannot name a conversation"), "{said}");
}
