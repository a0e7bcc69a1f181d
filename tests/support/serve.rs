//! One `turnstile serve` child on a free loopback port, with the test tokens (`http::ADMIN`,
//! `http::ALICE`…) and its data folder in a temporary directory. The child is killed when the
//! handle is dropped.

#![cfg(feature = "http")]
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;

use super::cli::TURNSTILE;
use super::http::{ADMIN, ALICE, BOB};

/// How long the child may take to print its address.
const STARTUP: Duration = Duration::from_secs(20);

/// The store a [`Serve`] keeps its sessions in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeStore {
    /// `--store memory`.
    Memory,
    /// `--store file:PATH`, in the child's temporary folder.
    File,
}

/// A running `turnstile serve`.
pub struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Holds the data folder and the tokens file until the child is gone.
    home: tempfile::TempDir,
    /// Everything the child wrote to stderr so far, when it was captured.
    stderr: Option<Arc<Mutex<Vec<u8>>>>,
}

/// How a [`Serve`] with a model runs: its agent's flags and how it logs.
pub struct ModelServe<'a> {
    /// `--base-url`: the fake model server's.
    pub base_url: &'a str,
    /// The API key, handed to the child in `TURNSTILE_TEST_KEY` (`--api-key-env`).
    pub key: &'a str,
    /// `RUST_LOG` of the child.
    pub log: &'a str,
    /// More arguments.
    pub extra: &'a [&'a str],
}

impl Serve {
    /// Starts `turnstile serve` over `store` with the mock agent (`latency_ms`, `chunks`) and
    /// `extra` arguments, and waits for its address. It is listening once it printed it.
    pub fn start(store: ServeStore, latency_ms: u64, chunks: usize, extra: &[&str]) -> Serve {
        let home = tempfile::tempdir().expect("a temporary folder");
        let store = match store {
            ServeStore::Memory => "memory".to_owned(),
            ServeStore::File => format!("file:{}", home.path().join("data").display()),
        };
        Self::start_in(home, &store, latency_ms, chunks, extra)
    }

    /// Like [`Serve::start`], with `--store` given as written (`postgres://…`, `redis://…`).
    pub fn start_on(store: &str, latency_ms: u64, chunks: usize, extra: &[&str]) -> Serve {
        let home = tempfile::tempdir().expect("a temporary folder");
        Self::start_in(home, store, latency_ms, chunks, extra)
    }

    /// Like [`Serve::start_on`], with `envs` set in the child and its stderr captured (read it
    /// with [`Serve::logs`]).
    pub fn start_with_env(
        store: &str,
        latency_ms: u64,
        chunks: usize,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Serve {
        let home = tempfile::tempdir().expect("a temporary folder");
        Self::start_full(home, store, latency_ms, chunks, extra, envs, true)
    }

    fn start_in(
        home: tempfile::TempDir,
        store: &str,
        latency_ms: u64,
        chunks: usize,
        extra: &[&str],
    ) -> Serve {
        Self::start_full(home, store, latency_ms, chunks, extra, &[], false)
    }

    fn start_full(
        home: tempfile::TempDir,
        store: &str,
        latency_ms: u64,
        chunks: usize,
        extra: &[&str],
        envs: &[(&str, &str)],
        capture: bool,
    ) -> Serve {
        let tokens = home.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("{ADMIN} admin\n{ALICE} user:alice\n{BOB} user:bob\n"),
        )
        .expect("write the tokens file");
        let mut child = Command::new(TURNSTILE)
            .args(["serve", "--addr", "127.0.0.1:0", "--agent", "mock"])
            .args(["--store", store])
            .args(["--latency", &latency_ms.to_string()])
            .args(["--chunks", &chunks.to_string()])
            .args(["--drain-timeout", "2"])
            .arg("--tokens")
            .arg(&tokens)
            .args(extra)
            .envs(envs.iter().copied())
            .env("TURNSTILE_HOME", home.path())
            .env("RUST_LOG", if capture { "warn" } else { "error" })
            .stdout(Stdio::piped())
            .stderr(if capture {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("start turnstile serve");
        let stderr = capture.then(|| capture_stderr(&mut child));
        let stdout = child.stdout.take().expect("piped stdout");
        let base = listening_address(stdout);
        Serve {
            child,
            base,
            home,
            stderr,
        }
    }

    /// Kills the child at once (SIGKILL): nothing of it runs after this returns.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill turnstile serve");
        self.child.wait().expect("reap turnstile serve");
    }

    /// Starts `turnstile serve --agent openai` over a memory store against the model server
    /// `how` names, with the test tokens, capturing its stderr (read it with [`Serve::logs`]).
    pub fn model(how: ModelServe<'_>) -> Serve {
        let home = tempfile::tempdir().expect("a temporary folder");
        let tokens = home.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("{ADMIN} admin\n{ALICE} user:alice\n{BOB} user:bob\n"),
        )
        .expect("write the tokens file");
        let mut child = Command::new(TURNSTILE)
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args([
                "--agent",
                "openai",
                "--base-url",
                how.base_url,
                "--model",
                "m",
            ])
            .args([
                "--api-key-env",
                "TURNSTILE_TEST_KEY",
                "--drain-timeout",
                "2",
            ])
            .arg("--tokens")
            .arg(&tokens)
            .args(how.extra)
            .env("TURNSTILE_HOME", home.path())
            .env("TURNSTILE_TEST_KEY", how.key)
            .env("RUST_LOG", how.log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start turnstile serve");
        let stderr = capture_stderr(&mut child);
        let stdout = child.stdout.take().expect("piped stdout");
        let base = listening_address(stdout);
        Serve {
            child,
            base,
            home,
            stderr: Some(stderr),
        }
    }

    /// What the child wrote to stderr so far (its log), when it was captured.
    pub fn logs(&self) -> String {
        let captured = self.stderr.as_ref().expect("stderr is captured");
        String::from_utf8_lossy(&captured.lock()).into_owned()
    }

    /// The data folder of a [`ServeStore::File`] server.
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.home.path().join("data")
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's peak resident memory so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read the child's /proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmHWM line")
    }

    /// Sends the child SIGTERM (it drains) and waits for it to exit, for at most `within`.
    pub fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM");
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the child") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "turnstile serve did not exit within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The ids of the child's own child processes.
    pub fn children(&self) -> Vec<u32> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid()))
            .expect("read the child's tasks");
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
            .flat_map(|list| {
                list.split_whitespace()
                    .filter_map(|pid| pid.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    }

    /// Whether the child is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `/metrics`, read with the admin token.
    pub async fn metrics(&self) -> String {
        reqwest::Client::new()
            .get(self.url("/metrics"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("a metrics page")
    }

    /// Turns this server answered 200 (`turnstile_http_requests_total` of the turns route).
    pub async fn turns_answered(&self) -> u64 {
        self.metrics()
            .await
            .lines()
            .filter(|l| l.starts_with("turnstile_http_requests_total"))
            .filter(|l| l.contains("/turns\"") && l.contains("status=\"200\""))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the child's `listening on URL` line, and keeps draining its stdout afterwards so that
/// it never blocks on a full pipe.
/// Reads the child's stderr into a buffer, from a thread of its own.
fn capture_stderr(child: &mut Child) -> Arc<Mutex<Vec<u8>>> {
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let mut pipe = child.stderr.take().expect("piped stderr");
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            sink.lock().extend_from_slice(&buffer[..n]);
        }
    });
    stderr
}

fn listening_address(stdout: std::process::ChildStdout) -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("turnstile serve: listening on ") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(url.to_owned());
                }
            }
        }
    });
    rx.recv_timeout(STARTUP)
        .expect("turnstile serve printed its address")
}
