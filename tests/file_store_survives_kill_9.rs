//! Property: every append a `FileStore` acknowledged survives `kill -9` of its process at any
//! moment, and the store opens and loads cleanly afterwards, round after round.
//!
//! The test binary re-executes itself as the writer: the child appends turns to several sessions
//! and prints `ACK <session> <seq>` after each `append` returned `Ok`; the parent kills it with
//! SIGKILL at a random moment, reopens the store and checks.
//!
//! A SIGKILL leaves the page cache whole. Every other round the parent also plays a power cut:
//! it takes away, at random, what the session files gained since the round began (the store
//! flushes them only at checkpoints; until then the journal alone holds those appends durably),
//! cutting logs short at any byte and removing folders made in the round — so that the reopen
//! must rebuild every acknowledged turn from the journal.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

/// Set in the child process: the store root to write to.
const CHILD_ENV: &str = "TURNSTILE_CRASH_WRITER_ROOT";
/// Kill-and-check rounds.
const ROUNDS: usize = 20;
/// Sessions the writer appends to concurrently.
const SESSIONS: usize = 4;
/// The whole test must end within this, whatever the machine.
const BUDGET: Duration = Duration::from_secs(60);

fn session(i: usize) -> SessionKey {
    SessionKey::new("crash", format!("s{i}")).expect("valid key")
}

#[test]
fn acknowledged_appends_survive_kill_9_at_random_moments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    println!("seed {seed}");
    let mut rng = seed;
    let started = Instant::now();
    let mut acked: HashMap<usize, u64> = HashMap::new();
    let mut total_acks = 0;
    // What each session's log held, durably, when the round began (after the last check,
    // whose clean close flushed everything).
    let mut durable: Vec<Option<u64>> = vec![None; SESSIONS];
    let mut heads: Vec<Option<Vec<u8>>> = vec![None; SESSIONS];
    let mut power_cuts = 0;
    // Rounds whose reopen found logs shorter than what was acknowledged and rebuilt them
    // from the journal (the store writes logs behind it, so a kill usually leaves some).
    let mut rebuilt = 0;
    for round in 0..ROUNDS {
        assert!(
            started.elapsed() < BUDGET,
            "ran out of time at round {round}"
        );
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "crash_writer_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the writer");
        let stdout = child.stdout.take().expect("piped stdout");
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("ACK ") {
                    let mut parts = rest.split(' ').map(|p| p.parse::<u64>().expect("number"));
                    seen.push((parts.next().expect("session"), parts.next().expect("seq")));
                }
            }
            seen
        });
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // The writer runs for a random time before the kill: where the kill lands is the
        // scenario, not a wait for anything.
        std::thread::sleep(Duration::from_millis(40 + rng % 260));
        child.kill().expect("SIGKILL the writer");
        child.wait().expect("reap the writer");
        for (i, seq) in reader.join().expect("reader thread") {
            let best = acked.entry(i as usize).or_default();
            *best = (*best).max(seq);
            total_acks += 1;
        }
        if !round.is_multiple_of(2) {
            power_cuts += lose_unflushed(dir.path(), &durable, &heads, &mut rng);
        }
        let killed: Vec<Option<u64>> = (0..SESSIONS)
            .map(|i| {
                std::fs::metadata(log_path(dir.path(), i))
                    .ok()
                    .map(|m| m.len())
            })
            .collect();
        check(dir.path(), &acked, round);
        let reopened: Vec<Option<u64>> = (0..SESSIONS)
            .map(|i| {
                std::fs::metadata(log_path(dir.path(), i))
                    .ok()
                    .map(|m| m.len())
            })
            .collect();
        if killed.iter().zip(&reopened).any(|(k, r)| r > k) {
            rebuilt += 1;
        }
        for (i, len) in durable.iter_mut().enumerate() {
            *len = std::fs::metadata(log_path(dir.path(), i))
                .ok()
                .map(|m| m.len());
            heads[i] = std::fs::read(head_path(dir.path(), i)).ok();
        }
    }
    assert!(
        rebuilt > 0,
        "no reopen had to rebuild a log from the journal: it was never needed"
    );
    assert!(
        power_cuts > 0,
        "no power cut took anything away: the journal was never needed for it"
    );
    println!("{power_cuts} files cut by power cuts, {rebuilt} rounds rebuilt from the journal");
    assert!(
        total_acks >= ROUNDS,
        "the writer barely wrote ({total_acks} acks): the test proved little"
    );
    println!("{total_acks} acknowledged turns over {ROUNDS} kills");
}

/// Session `i`'s head file.
fn head_path(root: &std::path::Path, i: usize) -> std::path::PathBuf {
    root.join(format!("users/crash/sessions/s{i}/head.json"))
}

/// Session `i`'s log file.
fn log_path(root: &std::path::Path, i: usize) -> std::path::PathBuf {
    root.join(format!("users/crash/sessions/s{i}/log.jsonl"))
}

fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// Plays a power cut after the kill: each log loses a random part of what it gained since the
/// round began (`durable`: its length then, `None` if it did not exist), a head rewritten in the
/// round may be left empty (renamed into place, its content never written; `heads`: each head
/// then), and a session folder made in the round may vanish whole. Returns how many files lost
/// something.
fn lose_unflushed(
    root: &std::path::Path,
    durable: &[Option<u64>],
    heads: &[Option<Vec<u8>>],
    rng: &mut u64,
) -> usize {
    let mut lost = 0;
    for (i, start) in durable.iter().enumerate() {
        let head = head_path(root, i);
        if let Ok(now) = std::fs::read(&head) {
            if heads[i].as_ref() != Some(&now) && next(rng).is_multiple_of(2) {
                std::fs::write(&head, b"").expect("empty the head");
                lost += 1;
            }
        }
        let path = log_path(root, i);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let now = meta.len();
        match start {
            None if next(rng).is_multiple_of(2) => {
                std::fs::remove_dir_all(path.parent().expect("session folder"))
                    .expect("remove the session folder");
                lost += 1;
            }
            start => {
                let from = start.unwrap_or(0);
                if now > from {
                    let keep = from + next(rng) % (now - from);
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .and_then(|f| f.set_len(keep))
                        .expect("cut the log");
                    lost += 1;
                }
            }
        }
    }
    lost
}

/// Reopens the store and checks every acknowledged turn is there, dense and readable.
fn check(root: &std::path::Path, acked: &HashMap<usize, u64>, round: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = FileStore::open(root).expect("reopen after the kill");
        for i in 0..SESSIONS {
            let key = session(i);
            let loaded = store
                .load(&key, 4)
                .await
                .unwrap_or_else(|e| panic!("round {round}: {key} does not load: {e}"));
            let want = acked.get(&i).copied().unwrap_or(0);
            let Some(record) = loaded.record else {
                assert_eq!(want, 0, "round {round}: {key} lost its acknowledged turns");
                continue;
            };
            assert!(
                record.next_seq > want,
                "round {round}: {key} lost seq {want}"
            );
            let events = store.read_events(&key, 1, usize::MAX).await.expect("read");
            for (n, event) in events.iter().enumerate() {
                assert_eq!(event.seq, n as u64 + 1, "round {round}: {key} is not dense");
            }
            let user = &loaded.user_state[&format!("last_{i}")];
            assert!(
                user.as_u64().expect("number") >= want,
                "round {round}: user state lost"
            );
            let app = &loaded.app_state[&format!("last_{i}")];
            assert!(
                app.as_u64().expect("number") >= want,
                "round {round}: app state lost"
            );
        }
    });
}

/// Not a test of its own: the writer half of the crash test, run in a child process.
#[test]
fn crash_writer_child() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let store = Arc::new(FileStore::open(root).expect("open in the child"));
        let writers: Vec<_> = (0..SESSIONS)
            .map(|i| tokio::spawn(write_forever(store.clone(), i)))
            .collect();
        for writer in writers {
            writer.await.expect("writer");
        }
    });
}

async fn write_forever(store: Arc<FileStore>, i: usize) {
    let key = session(i);
    let loaded = store.load(&key, 1).await.expect("load in the child");
    let (mut version, mut seq) = loaded.record.map_or((0, 1), |r| (r.version, r.next_seq));
    loop {
        let delta: StateDelta = [
            ("n".to_owned(), json!(seq + 1)),
            (format!("user:last_{i}"), json!(seq + 1)),
            (format!("app:last_{i}"), json!(seq + 1)),
        ]
        .into();
        // Varied sizes make it likelier that a kill lands in the middle of a write.
        let text = "x".repeat((seq as usize * 977) % 9_000);
        let events = turn_events(seq, &text, Some(delta));
        version = store
            .append(&key, version, &events)
            .await
            .expect("append in the child");
        println!("ACK {i} {}", seq + 1);
        if seq % 6 == 1 {
            // The store writes session files behind its journal, at the latest half a second
            // on: write them now and then, as a busy store's thresholds would, so that kills
            // also land in writes behind and power cuts have written-but-unflushed bytes to
            // take away.
            store.settle_files().await.expect("settle in the child");
        }
        seq += 2;
    }
}
