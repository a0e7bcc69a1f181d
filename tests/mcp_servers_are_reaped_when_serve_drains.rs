//! Property: when `serve` drains (SIGTERM), it stops its stdio MCP servers and reaps them before
//! it exits — also a server that no longer reacts to its input closing (frozen with SIGSTOP,
//! which would otherwise outlive `serve`) — and its log says so. A process the server started
//! in its group that ignores SIGTERM (a launcher's child, a helper) is stopped with it: when
//! `serve` drains, and when the server dies and is restarted.

#![cfg(all(feature = "mcp", feature = "http"))]

mod support;

use std::time::Duration;

use support::fake_openai::FakeOpenAi;
use support::harness::eventually;
use support::mcp::{everything, exists, fixture_command, signal, KillOnDrop};
use support::serve::{ModelServe, Serve};

#[tokio::test]
async fn a_frozen_stdio_server_is_killed_and_reaped_on_drain() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let spec = format!("everything=stdio:{} stdio", everything().display());
    let mut serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-unused-key-0000",
        log: "warn,turnstile::mcp=info",
        extra: &["--mcp", &spec],
    });
    let children = serve.children();
    assert_eq!(children.len(), 1, "one server process: {children:?}");
    let server = children[0];
    let _cleanup = KillOnDrop(server);
    signal(server, "STOP");

    let status = serve.terminate(Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    assert!(!exists(server), "the MCP server's process {server} is gone");
    let logs = serve.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("MCP server stopped") && l.contains("everything")),
        "{logs}"
    );
}

/// A stdio server started by a shell script that first starts a helper ignoring SIGTERM (in the
/// server's process group, as a launcher's children are) and writes its process id to a file:
/// `(spec, the file)`.
fn with_a_stubborn_helper(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let pid_file = dir.join("helper.pid");
    let script = dir.join("launch.sh");
    std::fs::write(
        &script,
        format!(
            "( trap '' TERM; exec sleep 1000 ) &\necho $! > {}\nexec {}\n",
            pid_file.display(),
            fixture_command()
        ),
    )
    .expect("write the launcher");
    (
        format!("stubborn=stdio:/bin/sh {}", script.display()),
        pid_file,
    )
}

/// `serve` with the stubborn launcher's server (see [`with_a_stubborn_helper`]) in `dir`:
/// `(serve, the file its helper's id is written to)`.
fn serve_with_a_stubborn_helper(
    fake: &FakeOpenAi,
    dir: &std::path::Path,
) -> (Serve, std::path::PathBuf) {
    let (spec, pid_file) = with_a_stubborn_helper(dir);
    let serve = Serve::model(ModelServe {
        base_url: &fake.base_url,
        key: "sk-unused-key-0000",
        log: "warn,turnstile::mcp=info",
        extra: &["--mcp", &spec],
    });
    (serve, pid_file)
}

/// The helper's process id, once the launcher wrote it.
async fn helper(pid_file: &std::path::Path) -> u32 {
    let mut pid = None;
    eventually("the launcher writes its helper's id", || {
        pid = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|text| text.trim().parse().ok());
        pid.is_some()
    })
    .await;
    pid.expect("a process id")
}

/// Whether `pid` runs: it exists and is not a zombie (an exited process nobody reaped yet).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z')
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn a_helper_that_ignores_sigterm_is_stopped_with_its_server_on_drain() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (mut serve, pid_file) = serve_with_a_stubborn_helper(&fake, dir.path());
    let helper = helper(&pid_file).await;
    let _cleanup = KillOnDrop(helper);
    assert!(running(helper), "the helper {helper} runs");

    let status = serve.terminate(Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    assert!(
        !running(helper),
        "the helper {helper} of the MCP server outlived serve"
    );
}

#[tokio::test]
async fn a_helper_that_ignores_sigterm_is_stopped_when_its_server_dies_and_restarts() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (mut serve, pid_file) = serve_with_a_stubborn_helper(&fake, dir.path());
    let first = helper(&pid_file).await;
    let _cleanup = KillOnDrop(first);
    let children = serve.children();
    assert_eq!(children.len(), 1, "one server process: {children:?}");
    std::fs::remove_file(&pid_file).expect("remove the first id");
    signal(children[0], "KILL");

    // The server is restarted (a new helper is started with it) and the old helper is gone.
    let second = helper(&pid_file).await;
    let _cleanup_second = KillOnDrop(second);
    assert_ne!(first, second);
    eventually("the dead server's helper is stopped", || !running(first)).await;
    assert!(serve.is_running(), "serve goes on");
    let status = serve.terminate(Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    assert!(
        !running(second),
        "the second helper {second} outlived serve: {}",
        serve.logs()
    );
}
