//! The MCP servers the tests run: the reference servers (`@modelcontextprotocol/server-everything`
//! from npm, `mcp-server-time` from PyPI; `scripts/test.sh` installs them), a tap that records what
//! passes between turnstile and a stdio server, and a small server built on the Python SDK for
//! what the reference servers do not do (a huge result). A test whose server is missing fails
//! saying how to install it.

#![cfg(feature = "mcp")]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use turnstile::{InMemoryStore, McpServer, McpTools, OpenAiAgent, Runtime, Store};

use super::fake_openai::{FakeOpenAi, Reply};

/// The versions `scripts/test.sh` installs.
pub const EVERYTHING_PACKAGE: &str = "@modelcontextprotocol/server-everything@2026.8.31";
pub const TIME_PACKAGE: &str = "mcp-server-time==2026.10.19";

/// The folder of the test scripts.
const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mcp");

/// The path of `program` on `PATH`; fails the test saying how to install it if it is missing.
pub fn installed(program: &str, install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the MCP server {program} is not installed; install it with `{install}` \
                 (scripts/test.sh does)"
            )
        })
}

/// `mcp-server-everything`, the reference server of every protocol feature.
pub fn everything() -> PathBuf {
    installed(
        "mcp-server-everything",
        &format!("npm install -g {EVERYTHING_PACKAGE}"),
    )
}

/// `mcp-server-time`, the reference time server (Python).
pub fn time() -> PathBuf {
    installed(
        "mcp-server-time",
        &format!("python3 -m pip install {TIME_PACKAGE}"),
    )
}

/// Python 3 with the `mcp` package (it comes with `mcp-server-time`), for the scripts here.
pub fn python() -> PathBuf {
    let python = installed("python3", "apt-get install python3");
    let found = Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "the Python package `mcp` is not installed; install it with `python3 -m pip install \
         {TIME_PACKAGE}` (scripts/test.sh does)"
    );
    python
}

/// The `--mcp` spec of `program args…` run through the tap, which logs every line both ways
/// to `log` (`> ` to the server, `< ` from it) and writes the server's pid first (`pid N`).
pub fn tapped(name: &str, log: &Path, program: &Path, args: &[&str]) -> String {
    let mut spec = format!(
        "{name}=stdio:{} {SCRIPTS}/tap.py {} {}",
        python().display(),
        log.display(),
        program.display()
    );
    for arg in args {
        spec.push(' ');
        spec.push_str(arg);
    }
    spec
}

/// The `--mcp` spec of the Python fixture server (`fixture.py`).
pub fn fixture(name: &str) -> String {
    format!("{name}=stdio:{}", fixture_command())
}

/// The command line of the fixture server, `python3 …/fixture.py`.
pub fn fixture_command() -> String {
    format!("{} {SCRIPTS}/fixture.py", python().display())
}

/// What a tap recorded so far: `(to_server, message)` per line.
pub fn tap_lines(log: &Path) -> Vec<(bool, Value)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (to_server, json) = match line.split_at_checked(2)? {
                ("> ", json) => (true, json),
                ("< ", json) => (false, json),
                _ => return None,
            };
            Some((to_server, serde_json::from_str(json).ok()?))
        })
        .collect()
}

/// The server's pid the tap wrote, once it did.
pub fn tap_pid(log: &Path) -> Option<u32> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("pid ")?.trim().parse().ok())
}

/// Whether a process with this pid exists (a zombie counts: it is not reaped).
pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Sends `signal` (`STOP`, `KILL`…) to `pid`.
pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Kills a process when dropped (a server the test stopped, so that it never outlives it).
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .status();
    }
}

/// `mcp-server-everything streamableHttp` on a free loopback port; killed when dropped.
pub struct HttpEverything {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl HttpEverything {
    /// Starts it and waits until it accepts connections.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mcp-server-everything streamableHttp");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "mcp-server-everything streamableHttp did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects to `spec` (an `--mcp` spelling), failing the test if it cannot.
pub async fn connect(spec: &str) -> McpTools {
    let server: McpServer = spec.parse().expect("a valid --mcp spec");
    super::harness::within(McpTools::builder().server(server).connect())
        .await
        .expect("the MCP server starts")
}

/// A runtime over a memory store whose model (a fake server answering `script`) is offered
/// `tools`.
pub async fn model_runtime(
    tools: &McpTools,
    script: Vec<Reply>,
) -> (FakeOpenAi, Runtime, Arc<dyn Store>) {
    let fake = FakeOpenAi::start(script).await;
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .without_api_key()
        .with_mcp(tools.clone())
        .build()
        .expect("the agent builds");
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let runtime = Runtime::builder()
        .agent(agent)
        .store_arc(store.clone())
        .build()
        .expect("the runtime builds");
    (fake, runtime, store)
}

/// The model asking for one call of `name` with `arguments`.
pub fn asks(name: &str, arguments: &str) -> Reply {
    Reply::ToolCalls(vec![("m1".into(), name.into(), arguments.into())])
}

/// The `tool` messages of a request, as `(tool_call_id, content)`.
pub fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
