//! Running the `turnstile` binary from tests.

use std::process::{Command, Output};

/// The binary Cargo built for these tests.
pub const TURNSTILE: &str = env!("CARGO_BIN_EXE_turnstile");

/// What one run of the binary printed and how it exited.
pub struct Run {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Self {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs `turnstile ARGS…` to the end, with no terminal (so no progress bar).
pub fn turnstile(args: &[&str]) -> Run {
    Command::new(TURNSTILE)
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("run the turnstile binary")
        .into()
}

/// Like [`turnstile`], parsing standard output as one JSON document.
pub fn turnstile_json(args: &[&str]) -> (Run, serde_json::Value) {
    let run = turnstile(args);
    let value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "turnstile {args:?} printed no JSON ({e}):\n{}\n{}",
            run.stdout, run.stderr
        )
    });
    (run, value)
}
