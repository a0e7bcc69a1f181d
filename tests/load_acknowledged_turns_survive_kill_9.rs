//! Property: every turn `turnstile load` acknowledged on the file store (and wrote to its
//! `--ack-log`) is in the store after the process is killed with SIGKILL at an arbitrary moment,
//! and the store opens cleanly afterwards.
//!
//! The binary runs a long workload; the test waits until the ack log holds a given number of
//! lines (different each round, so the kill lands at different points), kills the process,
//! reopens the store and checks every logged `KEY SEQ`.
//!
//! After the first kill it also plays the worst power cut the store allows for: nothing it
//! wrote to the session files reached the disk — no log, no head, no folder — only its journal,
//! which it flushes before acknowledging. Every acknowledged turn must come back from the
//! journal alone.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::cli::TURNSTILE;
use turnstile::backend::FileStore;
use turnstile::state::EventKind;
use turnstile::{SessionKey, Store};

/// The whole test must end within this, whatever the machine.
const BUDGET: Duration = Duration::from_secs(60);
/// How often the ack log is read while waiting.
const POLL_EVERY: Duration = Duration::from_millis(2);
/// Acknowledged turns to wait for before each kill.
const KILL_AFTER: [usize; 3] = [20, 150, 600];

/// A plain test, not a `#[tokio::test]`: it blocks while it polls the child's ack log, which
/// must not happen on an async runtime's worker. The store is read on a runtime of its own.
#[test]
fn acknowledged_turns_are_in_the_store_after_kill_9() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime to read the store");
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("store");
    let ack_log = dir.path().join("acks.log");
    for (round, lines) in KILL_AFTER.into_iter().enumerate() {
        let mut child = Command::new(TURNSTILE)
            .args(["load", "--sessions=32", "--turns=100000", "--concurrency=8"])
            .arg(format!("--store=file:{}", root.display()))
            .arg(format!("--ack-log={}", ack_log.display()))
            .args(["--progress=never", "--json"])
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start turnstile load");
        let target = count_lines(&ack_log) + lines;
        // Polls the log until the condition holds, within the deadline; the sleep only paces
        // the polling, it is never what the test waits for.
        while count_lines(&ack_log) < target {
            assert!(
                started.elapsed() < BUDGET,
                "round {round}: only {} acknowledgements so far",
                count_lines(&ack_log)
            );
            assert!(
                child.try_wait().expect("poll the child").is_none(),
                "round {round}: turnstile load exited early"
            );
            std::thread::sleep(POLL_EVERY);
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        if round == 0 {
            lose_every_session_file(&root);
        }
        runtime.block_on(check(&root, &ack_log, round));
    }
    assert!(started.elapsed() < BUDGET, "took {:?}", started.elapsed());
}

/// A power cut before the store's first checkpoint: every session file and folder is gone, the
/// journal is all that is left. Only sound while the journal was never checkpointed (its first
/// segment is still there, alone): a checkpoint flushes the files and drops what it covered.
fn lose_every_session_file(root: &Path) {
    let segments: Vec<String> = std::fs::read_dir(root.join("journal"))
        .expect("the store keeps a journal")
        .map(|e| {
            e.expect("a journal entry")
                .file_name()
                .into_string()
                .expect("a name")
        })
        .collect();
    assert_eq!(
        segments,
        ["0000000000000001.wal"],
        "the first run's journal was checkpointed already: the power cut would lose flushed data"
    );
    // Each user's `sessions` folder (a user's `user.json` beside it was flushed on its own).
    let mut owners: Vec<std::path::PathBuf> = vec![root.join("anonymous")];
    if let Ok(users) = std::fs::read_dir(root.join("users")) {
        owners.extend(users.map(|u| u.expect("a user folder").path()));
    }
    let mut lost = 0;
    for owner in owners {
        let sessions = owner.join("sessions");
        if sessions.exists() {
            std::fs::remove_dir_all(&sessions).expect("remove the session folders");
            lost += 1;
        }
    }
    // The store writes session files behind its journal: a run killed early may have written
    // none yet, and then the journal is all there is already.
    // What the segment holds ends at its last non-zero byte: the zeros after it are room the
    // journal grew it by ahead of its batches.
    let journal = std::fs::read(root.join("journal").join(&segments[0]))
        .expect("the journal's segment")
        .iter()
        .rposition(|b| *b != 0)
        .map_or(0, |last| last + 1);
    assert!(
        lost > 0 || journal > 4096,
        "the run wrote no session folder and its journal holds nothing"
    );
}

fn count_lines(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

/// Reopens the store and checks every logged acknowledgement is there.
async fn check(root: &Path, ack_log: &Path, round: usize) {
    let text = std::fs::read_to_string(ack_log).expect("read the ack log");
    let mut acked: HashMap<SessionKey, Vec<u64>> = HashMap::new();
    for line in text.lines() {
        let (key, seq) = line.rsplit_once(' ').expect("KEY SEQ");
        let key: SessionKey = key.parse().expect("a session key");
        acked
            .entry(key)
            .or_default()
            .push(seq.parse().expect("a seq"));
    }
    let store = FileStore::open(root).expect("the store reopens after the kill");
    for (key, seqs) in &acked {
        let events = store
            .read_events(key, 1, usize::MAX)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {key} does not read: {e}"));
        for (n, event) in events.iter().enumerate() {
            assert_eq!(event.seq, n as u64 + 1, "round {round}: {key} is not dense");
        }
        for &seq in seqs {
            let event = events
                .get(seq as usize - 1)
                .unwrap_or_else(|| panic!("round {round}: {key} lost acknowledged seq {seq}"));
            assert!(
                matches!(event.kind, EventKind::AgentOutput { .. }),
                "round {round}: {key} seq {seq} is not the turn's answer"
            );
        }
    }
}
