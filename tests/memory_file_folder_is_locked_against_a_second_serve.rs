//! Property: a `--memory file:DIR` folder serves one process at a time, as the store and
//! artifact folders do: a second `turnstile serve` on the same folder refuses to start and says
//! why (its indexes would never see the first one's writes), and once the first is gone the
//! folder opens again.

#![cfg(feature = "http")]

mod support;

use std::process::Stdio;

use support::cli::TURNSTILE;
use support::harness::within;
use support::serve::{Serve, ServeStore};

async fn second_serve(memory: &str) -> (std::process::ExitStatus, String) {
    let mut child = tokio::process::Command::new(TURNSTILE)
        .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
        .args(["--memory", memory])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a second serve");
    let status = within(child.wait()).await.expect("the second serve exits");
    let mut stderr = String::new();
    use tokio::io::AsyncReadExt;
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    (status, stderr)
}

#[tokio::test]
async fn a_second_serve_on_the_same_memory_folder_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let memory = format!("file:{}", folder.path().join("memory").display());
    let first = Serve::start(ServeStore::Memory, 0, 1, &["--memory", &memory]);
    let (status, stderr) = second_serve(&memory).await;
    assert!(!status.success(), "the second serve must not start");
    assert!(
        stderr.contains("is in use by another process"),
        "it says why: {stderr}"
    );
    drop(first);
    let again = Serve::start(ServeStore::Memory, 0, 1, &["--memory", &memory]);
    drop(again);
}
