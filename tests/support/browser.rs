//! A real browser for the page tests: headless Chromium driven over WebDriver (chromedriver on
//! a free loopback port), against a `turnstile serve` started on a free port with the mock
//! agent. Both processes are started per test and killed when dropped. Missing Chromium or
//! chromedriver fails the test with the command that installs them.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::cli::TURNSTILE;
use super::harness::{eventually_ok, TIMEOUT};

/// An admin token of the served process.
pub const ADMIN: &str = "console-admin-token-0000";
/// A token for the user `alice`.
pub const ALICE: &str = "console-alice-token-0000";

/// How often a wait looks at the page again.
const POLL: Duration = Duration::from_millis(50);

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// `turnstile serve` on a free loopback port, with the tokens above and a memory store.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    child: Child,
    _tokens: tempfile::TempDir,
}

impl Server {
    /// Starts `serve` whose mock agent takes `latency` per reply, streamed in `chunks`.
    pub async fn start(latency: Duration, chunks: usize) -> Self {
        let latency = latency.as_millis().to_string();
        let chunks = chunks.to_string();
        Self::with_agent(&[
            "--agent",
            "mock",
            "--latency",
            &latency,
            "--chunks",
            &chunks,
        ])
        .await
    }

    /// Starts `serve` with the agent these arguments choose (`--agent openai --base-url …`).
    pub async fn with_agent(agent: &[&str]) -> Self {
        let tokens = tempfile::tempdir().expect("a temporary folder");
        let file = tokens.path().join("tokens");
        std::fs::write(&file, format!("{ADMIN} admin\n{ALICE} user:alice\n"))
            .expect("write the tokens file");
        let mut child = Command::new(TURNSTILE)
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args(agent)
            .arg("--tokens")
            .arg(&file)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start turnstile serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(TIMEOUT, lines.next_line())
            .await
            .expect("serve printed its address in time")
            .expect("read serve's stdout")
            .expect("serve printed a line");
        let base = first
            .strip_prefix("turnstile serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from serve: {first}"))
            .to_owned();
        // Keep reading so that serve never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            base,
            child,
            _tokens: tokens,
        }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A headless Chromium session over its own chromedriver.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
}

fn require(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: the page tests need a real browser. Install it with \
         `apt-get install -y chromium chromium-driver` (.ci/run does this when it is missing)"
    );
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless window.
    pub async fn start() -> Self {
        require(CHROMIUM);
        require(CHROMEDRIVER);
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                // No sandbox: tests run as root in CI, where Chromium refuses its sandbox.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--no-first-run", "--disable-extensions"],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        // chromedriver listens a moment after it starts: retry the session until then.
        let what = format!("a WebDriver session from chromedriver at {url}");
        let client = eventually_ok(&what, POLL, || async {
            ClientBuilder::new(connector.clone())
                .capabilities(caps.clone())
                .connect(&url)
                .await
        })
        .await;
        Self { client, driver }
    }

    /// Opens `url` and signs in with `token` (and, for an admin on the chat page, `as_user`).
    pub async fn sign_in(&self, url: &str, token: &str, as_user: Option<&str>) {
        self.client.goto(url).await.expect("open the page");
        let field = self.visible("#token").await;
        field.send_keys(token).await.expect("type the token");
        if let Some(user) = as_user {
            let input = self
                .client
                .find(Locator::Css("#as-user"))
                .await
                .expect("#as-user");
            input.send_keys(user).await.expect("type the user");
        }
        self.click("#signin-form button[type=submit]").await;
    }

    /// On the chat page: opens the session `id` from the new-session form and waits until its
    /// message field can send.
    pub async fn open_session(&self, id: &str) {
        self.type_into("#new-session-id", id).await;
        self.click("#new-session button").await;
        self.until_true(
            "the session is open",
            "return !document.getElementById('send').disabled;",
        )
        .await;
    }

    /// On the chat page: types `text` into the message field and sends it.
    pub async fn send(&self, text: &str) {
        self.type_into("#input", text).await;
        self.click("#send").await;
    }

    /// On the chat page: waits until the conversation shows `n` stored items (`what` names the
    /// moment in the failure message).
    pub async fn until_stored(&self, what: &str, n: usize) {
        let script = format!(
            "return document.querySelectorAll('#history li[data-state=stored]').length === {n};"
        );
        self.until_true(what, &script).await;
    }

    /// Waits until `css` names a displayed element and returns it.
    pub async fn visible(&self, css: &str) -> fantoccini::elements::Element {
        let what = format!("{css} to be displayed");
        eventually_ok(&what, POLL, || async {
            let el = self.client.find(Locator::Css(css)).await;
            match el {
                Ok(el) if el.is_displayed().await.unwrap_or(false) => Ok(el),
                Ok(_) => Err("present, not displayed".to_owned()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }

    /// Clicks the element `css` names once it is displayed.
    pub async fn click(&self, css: &str) {
        self.visible(css).await.click().await.expect("click");
    }

    /// Types `text` into the element `css` names.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.visible(css).await.send_keys(text).await.expect("type");
    }

    /// Runs `script` (a function body that `return`s a JSON value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Waits until `script` returns `true`.
    pub async fn until_true(&self, what: &str, script: &str) {
        until(what, || async {
            self.eval(script).await == Value::Bool(true)
        })
        .await;
    }

    /// Waits until the reply being streamed shows some text, and returns that text.
    pub async fn streamed_part(&self) -> String {
        let script = "const li = document.querySelector('#history li[data-state=streaming]');
                      return li ? li.querySelector('.text').textContent : '';";
        eventually_ok("a streamed chunk", POLL, || async {
            match self.eval(script).await {
                Value::String(text) if !text.is_empty() => Ok(text),
                other => Err(other),
            }
        })
        .await
    }

    /// Writes a screenshot of the page to `target/console-screenshots/NAME.png` and returns
    /// its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("take a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG image");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("create the screenshot folder");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write the screenshot");
        path
    }

    /// Ends the browser session and chromedriver.
    pub async fn stop(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// `target/console-screenshots` of this build (honouring `CARGO_TARGET_DIR`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("console-screenshots")
}

/// Polls `check` until it answers true, failing the test after [`TIMEOUT`].
pub async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_ok(what, POLL, || {
        let holds = check();
        async move {
            if holds.await {
                Ok(())
            } else {
                Err("not yet")
            }
        }
    })
    .await;
}

/// A script returning every item of the conversation: its state, classes and text.
pub const HISTORY: &str = "return [...document.querySelectorAll('#history li')].map(li => ({
    state: li.dataset.state, cls: li.className,
    text: li.querySelector('.text').textContent }));";

/// A port free on 127.0.0.1 a moment ago (the listener is closed before it is handed over).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
