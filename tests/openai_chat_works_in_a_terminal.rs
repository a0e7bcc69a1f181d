//! `turnstile chat` in a real terminal: the binary runs under a pseudo-terminal (util-linux
//! `script`), a scripted exchange streams the model's reply, and Ctrl-C typed into the terminal
//! interrupts the next reply — not the program — which closes the model's connection, keeps the
//! partial reply in the store, and leaves the conversation going until `/quit`. The reported
//! token usage is what `turnstile sessions show` prints afterwards.

#![cfg(all(feature = "openai", unix))]

mod support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use support::cli::{turnstile, TURNSTILE};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::state::{EventKind, InterruptReason, OutputStatus};
use turnstile::{FileStore, Store};

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

fn start(fake: &FakeOpenAi, dir: &std::path::Path) -> (Child, Screen) {
    let command = format!(
        "exec {TURNSTILE} chat ada/terminal --store file:{} --agent openai --base-url {} --model m",
        dir.display(),
        fake.base_url
    );
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("RUST_LOG", "error")
        .env_remove("OPENAI_API_KEY")
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

#[tokio::test]
async fn a_scripted_exchange_then_ctrl_c_interrupts_the_reply_not_the_program() {
    let long: Vec<String> = (0..500).map(|i| format!("w{i} ")).collect();
    let fake = FakeOpenAi::start(vec![
        Reply::text(&["Hello ", "Ada!"]),
        Reply::Text {
            deltas: long,
            delay: Duration::from_millis(20),
            usage: None,
        },
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (mut child, screen) = start(&fake, dir.path());

    screen.shows("you> ", 1).await;
    type_keys(&mut child, b"hi\r");
    screen.shows("Hello Ada!", 1).await;
    screen.shows("you> ", 2).await;
    assert!(fake.next_body_end().await.finished);

    type_keys(&mut child, b"tell me everything\r");
    screen.shows("w1 ", 1).await;
    type_keys(&mut child, b"\x03");
    screen.shows("[interrupted]", 1).await;
    let end = fake.next_body_end().await;
    assert!(!end.finished, "Ctrl-C closed the model's connection");
    screen.shows("you> ", 3).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the program still runs"
    );

    type_keys(&mut child, b"/quit\r");
    let status = within(tokio::task::spawn_blocking(move || child.wait()))
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}\n{}", screen.text());

    // The usage the first reply reported is in the session's statistics.
    let store_flag = format!("file:{}", dir.path().display());
    let shown = turnstile(&["sessions", "--store", &store_flag, "show", "ada/terminal"]);
    assert!(
        shown.stdout.contains("10 in, 2 out"),
        "{}{}",
        shown.stdout,
        shown.stderr
    );

    let store = FileStore::open(dir.path()).unwrap();
    let key = key("ada", "terminal");
    let outputs: Vec<(String, OutputStatus)> = store
        .read_events(&key, 1, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::AgentOutput { text, status, .. } => Some((text, status)),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert_eq!(outputs[0], ("Hello Ada!".to_owned(), OutputStatus::Final));
    assert_eq!(
        outputs[1].1,
        OutputStatus::Interrupted(InterruptReason::Requested)
    );
    assert!(outputs[1].0.starts_with("w0 w1 "), "{:?}", outputs[1].0);
}
