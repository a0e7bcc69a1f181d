//! `turnstile serve --agent openai` answers turns with the model at `--base-url`, with the model
//! name and system prompt file it was given; without a base URL or model it refuses to start and
//! says which flags are missing.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use support::cli::{turnstile, TURNSTILE};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;

/// Kills the server when the test ends, passing or not.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serve_answers_a_turn_with_the_model() {
    let fake = FakeOpenAi::start(vec![Reply::text(&["from ", "the model"])]).await;
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("prompt.txt");
    std::fs::write(&prompt, "Be kind to {user:name}.").unwrap();
    let mut child = Command::new(TURNSTILE)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--agent",
            "openai",
        ])
        .args(["--base-url", &fake.base_url, "--model", "served-model"])
        .arg("--system-prompt")
        .arg(&prompt)
        .env("RUST_LOG", "error")
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start turnstile serve");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    let line = within(tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    }))
    .await
    .unwrap()
    .unwrap();
    let base = line
        .trim()
        .strip_prefix("turnstile serve: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();

    let response = within(
        reqwest::Client::new()
            .post(format!("{base}/v1/sessions/ada/s/turns"))
            .json(&json!({"input": "hello"}))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["output"], "from the model");
    let sent = &fake.requests()[0];
    assert_eq!(sent["model"], "served-model");
    assert_eq!(sent["messages"][0]["content"], "Be kind to .");
    assert_eq!(sent["messages"][1]["content"], "hello");
    drop(server);
}

#[test]
fn serve_without_a_base_url_names_the_missing_flags() {
    let run = turnstile(&[
        "serve", "--store", "memory", "--agent", "openai", "--model", "m",
    ]);
    assert!(!run.success);
    assert!(
        run.stderr
            .contains("--agent openai needs --base-url URL and --model NAME"),
        "{}",
        run.stderr
    );
}
