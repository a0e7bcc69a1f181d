//! A real browser for the page tests: headless Chromium driven over WebDriver (chromedriver on
//! a free loopback port), against a `turnstile serve` started on a free port with the mock
//! agent. Both processes are started per test and killed when dropped. Missing Chromium or
//! chromedriver fails the test with the command that installs them; so does a missing axe-core
//! for the accessibility checks. Each browser gets a profile folder of its own in a temporary
//! folder that [`Browser::stop`] (or dropping the browser) removes.

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
        Self::at("127.0.0.1:0", agent, true).await
    }

    /// Starts `serve` with the mock agent and no tokens (open to whoever reaches it, as on
    /// loopback by default).
    pub async fn open() -> Self {
        Self::at("127.0.0.1:0", &["--agent", "mock", "--latency", "0"], false).await
    }

    /// Starts `serve` again where `self` was (after [`Server::stop`]), with the mock agent: a
    /// server that comes back, with an empty memory store.
    pub async fn restart_at(base: &str) -> Self {
        let addr = base.trim_start_matches("http://");
        Self::at(addr, &["--agent", "mock", "--latency", "10"], true).await
    }

    async fn at(addr: &str, agent: &[&str], with_tokens: bool) -> Self {
        let tokens = tempfile::tempdir().expect("a temporary folder");
        let file = tokens.path().join("tokens");
        std::fs::write(&file, format!("{ADMIN} admin\n{ALICE} user:alice\n"))
            .expect("write the tokens file");
        let mut command = Command::new(TURNSTILE);
        command
            .args(["serve", "--addr", addr, "--store", "memory"])
            .args(agent);
        if with_tokens {
            command.arg("--tokens").arg(&file);
        }
        let mut child = command
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
    /// Chromium's profile (`--user-data-dir`): without one chromedriver makes a ~2 MB folder
    /// in the temporary folder per session and never removes it.
    profile: Option<tempfile::TempDir>,
}

/// Desktop and phone widths the page tests look at (CSS pixels).
pub const DESKTOP: (u32, u32) = (1280, 800);
/// The narrowest phone the pages are made for.
pub const PHONE: (u32, u32) = (360, 740);

fn require(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: the page tests need a real browser. Install it with \
         `apt-get install -y chromium chromium-driver` (scripts/test.sh does this when it is missing)"
    );
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless window of 1280×900.
    pub async fn start() -> Self {
        Self::sized(1280, 900).await
    }

    /// Starts chromedriver on a free port and opens a headless window whose page (viewport)
    /// is `width`×`height` CSS pixels.
    pub async fn sized(width: u32, height: u32) -> Self {
        Self::sized_with(width, height, &[]).await
    }

    /// [`Browser::start`] with more Chromium arguments (`--host-resolver-rules=…`, say).
    pub async fn with_args(args: &[&str]) -> Self {
        Self::sized_with(1280, 900, args).await
    }

    /// [`Browser::sized`] with more Chromium arguments (`--force-dark-mode`, say).
    pub async fn sized_with(width: u32, height: u32, args: &[&str]) -> Self {
        require(CHROMIUM);
        require(CHROMEDRIVER);
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // A process group of its own, which the Chromium it starts joins: see `Drop`.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let profile = tempfile::Builder::new()
            .prefix("turnstile-chromium-")
            .tempdir()
            .expect("a temporary profile folder");
        let mut caps = serde_json::Map::new();
        // No sandbox: tests run as root in CI, where Chromium refuses its sandbox.
        let mut all_args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        all_args.push(format!("--window-size={width},{height}"));
        all_args.push(format!("--user-data-dir={}", profile.path().display()));
        all_args.extend(args.iter().map(|a| (*a).to_owned()));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": CHROMIUM, "args": all_args }),
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
        let browser = Self {
            client,
            driver,
            profile: Some(profile),
        };
        // The window holds some browser chrome even when headless: grow it by that much, so
        // that the page itself is `width`×`height`.
        let sizes = browser
            .eval("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];")
            .await;
        let extra = |i: usize| u32::try_from(sizes[i].as_u64().unwrap_or(0)).unwrap_or(0);
        browser
            .client
            .set_window_size(width + extra(0), height + extra(1))
            .await
            .expect("size the window");
        let inner = browser
            .eval("return [window.innerWidth, window.innerHeight];")
            .await;
        assert_eq!(
            inner,
            json!([width, height]),
            "the page is {width}×{height} CSS pixels"
        );
        browser
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

    /// On the chat page: puts `text` (newlines and all, which typing would send early) in the
    /// message field and sends it.
    pub async fn send_whole(&self, text: &str) {
        let script = format!(
            "document.getElementById('input').value = {}; return true;",
            serde_json::to_string(text).expect("a JSON string")
        );
        self.eval(&script).await;
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

    /// Presses and releases `key` on whatever has the focus, as a keyboard would.
    pub async fn press(&self, key: fantoccini::key::Key) {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        let value = char::from(key);
        let actions = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        self.client
            .perform_actions(actions)
            .await
            .expect("press a key");
    }

    /// Presses Tab until the focus is on the element `css` names (at most `max_tabs` times), as
    /// a person without a mouse would: fails if it cannot be reached.
    pub async fn tab_to(&self, css: &str, max_tabs: usize) {
        let check = format!(
            "return document.activeElement !== null && document.activeElement.matches({});",
            serde_json::to_string(css).expect("a JSON string")
        );
        for _ in 0..max_tabs {
            if self.eval(&check).await == Value::Bool(true) {
                return;
            }
            self.press(fantoccini::key::Key::Tab).await;
        }
        let at = self
            .eval("const a = document.activeElement; return a ? a.outerHTML.slice(0, 200) : null;")
            .await;
        panic!("{css} was not reached with {max_tabs} presses of Tab; the focus is on {at}");
    }

    /// Whether the focus is on the element `css` names.
    pub async fn focused(&self, css: &str) -> bool {
        let check = format!(
            "return document.activeElement !== null && document.activeElement.matches({});",
            serde_json::to_string(css).expect("a JSON string")
        );
        self.eval(&check).await == Value::Bool(true)
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

    /// The profile folder Chromium writes to (removed by [`Browser::stop`]).
    pub fn profile(&self) -> PathBuf {
        self.profile
            .as_ref()
            .expect("the profile lives until stop")
            .path()
            .to_owned()
    }

    /// Ends the browser session, chromedriver and every Chromium process, then removes the
    /// profile folder.
    pub async fn stop(mut self) {
        let _ = self.client.clone().close().await;
        self.kill_group();
        let _ = self.driver.kill().await;
        let _ = self.driver.wait().await;
        let profile = self.profile.take().expect("stop runs once");
        let path = profile.path().to_owned();
        // Chromium's last processes may still write for a moment after the session closed.
        eventually_ok("the browser profile folder is removed", POLL, || {
            let path = path.clone();
            async move {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await;
        drop(profile);
    }

    /// Kills chromedriver's process group: chromedriver and the Chromium processes it started.
    fn kill_group(&self) {
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// The page's width as laid out (the widest of the document and its body), in CSS pixels.
    pub async fn layout_width(&self) -> u64 {
        self.eval(
            "return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);",
        )
        .await
        .as_u64()
        .expect("a width")
    }

    /// Runs axe-core in the page and returns its serious and critical violations, one line
    /// each (rule, impact, how many elements and the first one's selector).
    pub async fn axe_serious(&self) -> Vec<String> {
        self.axe(&["serious", "critical"]).await
    }

    /// [`Browser::axe_serious`] with the moderate violations too.
    pub async fn axe_moderate(&self) -> Vec<String> {
        self.axe(&["moderate", "serious", "critical"]).await
    }

    async fn axe(&self, impacts: &[&str]) -> Vec<String> {
        self.client
            .execute(axe_source(), vec![])
            .await
            .expect("inject axe-core into the page");
        let result = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { resultTypes: ['violations'] })
                    .then(r => done(r.violations.map(v => ({
                        id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
                        first: v.nodes[0] ? v.nodes[0].target.join(' ') : '',
                        summary: v.nodes[0] ? v.nodes[0].failureSummary : '' }))))
                    .catch(e => done([{ id: 'axe-failed', impact: 'critical',
                        help: String(e), count: 0, first: '', summary: '' }]));",
                vec![],
            )
            .await
            .expect("run axe-core");
        result
            .as_array()
            .expect("a list of violations")
            .iter()
            .filter(|v| v["impact"].as_str().is_some_and(|i| impacts.contains(&i)))
            .map(|v| {
                format!(
                    "{} ({}): {} — {} element(s), first {} — {}",
                    v["id"], v["impact"], v["help"], v["count"], v["first"], v["summary"]
                )
            })
            .collect()
    }
}

/// A test that fails before [`Browser::stop`] still leaves no Chromium running and no profile
/// folder behind (without this a failed test's Chromium lived on, writing into its profile).
impl Drop for Browser {
    fn drop(&mut self) {
        self.kill_group();
        if let Some(profile) = self.profile.take() {
            let path = profile.path().to_owned();
            // Killed processes may still hold the folder for an instant: a few tries, no wait.
            for _ in 0..100 {
                match std::fs::remove_dir_all(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => continue,
                    _ => break,
                }
            }
        }
    }
}

/// The pinned axe-core version `scripts/test.sh` installs (`npm install -g axe-core@…`).
pub const AXE_CORE_VERSION: &str = "4.14.1";

/// axe-core's browser script, read once from the global npm folder (or `$TURNSTILE_AXE_CORE`,
/// a path to `axe.min.js`). Missing, the test fails with the command that installs it.
fn axe_source() -> &'static str {
    static SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = std::env::var_os("TURNSTILE_AXE_CORE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let root = std::process::Command::new("npm")
                    .args(["root", "-g"])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_else(|| "/usr/lib/node_modules".to_owned());
                Path::new(&root).join("axe-core/axe.min.js")
            });
        let install = format!(
            "the accessibility checks need axe-core, which is missing at {}: install it with \
             `npm install -g axe-core@{AXE_CORE_VERSION}` (scripts/test.sh does this when it is \
             missing) or point TURNSTILE_AXE_CORE at its axe.min.js",
            path.display()
        );
        let source = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{install}"));
        let package = path.with_file_name("package.json");
        if let Ok(manifest) = std::fs::read_to_string(package) {
            let version = serde_json::from_str::<Value>(&manifest).ok();
            let version = version.as_ref().and_then(|m| m["version"].as_str());
            assert_eq!(
                version,
                Some(AXE_CORE_VERSION),
                "another axe-core is installed: {install}"
            );
        }
        source
    })
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
