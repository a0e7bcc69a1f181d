//! The official `openai` SDKs as clients of `turnstile serve` — the Python package and the npm
//! package, the versions `scripts/test.sh` installs — and runners for the scripts in
//! `tests/support/openai/`. A test whose client is missing fails saying how to install it; it
//! never skips.

#![cfg(feature = "http")]
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The version `scripts/test.sh` installs (pinned: the tests read the SDK's typed events and pages).
pub const OPENAI_PYTHON_PACKAGE: &str = "openai==3.60.0";

/// The npm package's version `scripts/test.sh` installs (globally), for the Node scripts.
pub const OPENAI_NPM_PACKAGE: &str = "openai@7.60.0";

/// The folder of the scripts.
const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/openai");

/// `python3`, with the `openai` package importable; fails the test saying how to install it.
pub fn python() -> PathBuf {
    let found = Command::new("python3")
        .args(["-c", "import openai"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "python3 with the official `openai` package is needed; install it with `python3 -m pip \
         install {OPENAI_PYTHON_PACKAGE}` (scripts/test.sh does)"
    );
    PathBuf::from("python3")
}

/// The LangChain package `scripts/test.sh` installs (pinned), for `langchain_turns.py`.
pub const LANGCHAIN_PACKAGE: &str = "langchain-openai==1.8.1";

/// The OpenAI Agents SDK `scripts/test.sh` installs (pinned), for `agents_turns.py`.
pub const AGENTS_PACKAGE: &str = "openai-agents==0.24.0";

/// `python3`, with `module` importable; fails the test saying to install `package`.
pub fn python_with(module: &str, package: &str) -> PathBuf {
    let found = Command::new(python())
        .args(["-c", &format!("import {module}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "python3 with `{module}` is needed; install it with `python3 -m pip install {package}` \
         (scripts/test.sh does)"
    );
    PathBuf::from("python3")
}

/// Like [`run_script`], once `module` (from `package`) is importable.
pub fn run_script_with(
    module: &str,
    package: &str,
    script: &str,
    args: &[&str],
) -> serde_json::Value {
    let output = Command::new(python_with(module, package))
        .arg(format!("{SCRIPTS}/{script}"))
        .args(args)
        .output()
        .expect("run the script");
    printed_json(script, &output)
}

/// What a script printed, once it succeeded: its last line of standard output, as JSON.
pub fn run_script(script: &str, args: &[&str]) -> serde_json::Value {
    let output = Command::new(python())
        .arg(format!("{SCRIPTS}/{script}"))
        .args(args)
        .output()
        .expect("run the SDK script");
    printed_json(script, &output)
}

/// The global npm folder, where `scripts/test.sh` installs the `openai` package; fails the test saying
/// how to install it when node, npm or the package is missing.
pub fn node_modules() -> PathBuf {
    let root = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let root = root.filter(|r| r.join("openai/package.json").exists());
    root.unwrap_or_else(|| {
        panic!(
            "node with the official `openai` npm package is needed; install it with `npm install \
             -g {OPENAI_NPM_PACKAGE}` (scripts/test.sh does)"
        )
    })
}

/// What a Node script printed, once it succeeded: its last line of standard output, as JSON.
pub fn run_node_script(script: &str, args: &[&str]) -> serde_json::Value {
    let output = Command::new("node")
        .arg(format!("{SCRIPTS}/{script}"))
        .args(args)
        .env("NODE_PATH", node_modules())
        .output()
        .expect("run node (install Node.js)");
    printed_json(script, &output)
}

/// A script's last line of standard output, as JSON, once it exited successfully; fails the test
/// with what it printed otherwise.
fn printed_json(script: &str, output: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}"))
}
