//! Property: `head.json` is rewritten only now and then, so after a crash the log past it can
//! hold many acknowledged appends; the store recovers each of them from its commit marker, and
//! the reopened session has exactly the version, state and events acknowledged before the crash
//! — the same as the running store held in memory — and goes on from there.
//!
//! A crash is modelled by copying the store's files right after an acknowledged append: every
//! append is fsync'd before it is acknowledged, so that copy is what a `kill -9` or a power cut
//! at that moment would leave (`file_store_survives_kill_9` kills a real writer).

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::StateDelta;
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store, StoreError};

use support::stores::{find_one, walk};

/// Appends made, enough to cross several head rewrites.
const TURNS: u64 = 70;

fn key() -> SessionKey {
    SessionKey::new("carol", "s").expect("valid key")
}

/// Copies every file under `from` (the lock file aside) to the same place under `to`.
fn crash_image(from: &Path, to: &Path) {
    for path in walk(from) {
        let target = to.join(path.strip_prefix(from).expect("under the root"));
        if path.is_dir() {
            std::fs::create_dir_all(&target).expect("create folder");
        } else if !path.ends_with("turnstile.lock") {
            std::fs::create_dir_all(target.parent().expect("parent")).expect("create folder");
            std::fs::copy(&path, &target).expect("copy file");
        }
    }
}

/// The version `head.json` holds, which lags the session's when appends lie past it.
fn head_version(root: &Path) -> u64 {
    let head: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find_one(root, "head.json")).expect("read head"))
            .expect("head is JSON");
    head["version"].as_u64().expect("version")
}

#[tokio::test]
async fn every_acknowledged_append_past_the_head_is_recovered_with_its_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let live_root = dir.path().join("live");
    let store = FileStore::open(&live_root).expect("open");
    let mut version = 0;
    let mut lags = BTreeSet::new();
    for t in 0..TURNS {
        let delta: StateDelta = [
            ("n".to_owned(), json!(t)),
            ("user:last".to_owned(), json!(t)),
        ]
        .into();
        let seq = 1 + 2 * t;
        version = store
            .append(
                &key(),
                version,
                &turn_events(seq, &format!("m{t}"), Some(delta)),
            )
            .await
            .expect("append");
        let image = dir.path().join(format!("crash-{t}"));
        crash_image(&live_root, &image);

        let reopened = FileStore::open(&image).expect("reopen the crash image");
        // Measured once the journal's replay wrote what the files lagged behind.
        lags.insert(version - head_version(&image));
        let loaded = reopened
            .load(&key(), 6)
            .await
            .expect("load after the crash");
        let record = loaded.record.clone().expect("head");
        assert_eq!(record.version, version, "after append {t}");
        assert_eq!(record.next_seq, seq + 2);
        assert_eq!(record.state["n"], json!(t));
        assert_eq!(record.stats.turns, t + 1);
        assert_eq!(loaded.user_state["last"], json!(t));
        let seqs: Vec<u64> = loaded.events.iter().map(|e| e.seq).collect();
        let first = (seq + 2).saturating_sub(6).max(1);
        assert_eq!(seqs, (first..seq + 2).collect::<Vec<_>>());
        assert_eq!(
            store.load(&key(), 6).await.expect("load the live store"),
            loaded,
            "the reopened store reads what the running one remembers"
        );
        let all = reopened
            .read_events(&key(), 1, usize::MAX)
            .await
            .expect("read");
        assert_eq!(all.len() as u64, seq + 1);

        let next = reopened
            .append(&key(), version, &turn_events(seq + 2, "after", None))
            .await
            .expect("append after the crash");
        assert_eq!(next, version + 1);
        let stale = reopened
            .append(&key(), version, &turn_events(seq + 4, "stale", None))
            .await;
        // The events would continue the log: only the stale version makes this fail.
        assert!(
            matches!(
                stale,
                Err(StoreError::Conflict { expected, found, .. })
                    if expected == version && found == version + 1
            ),
            "compare-and-set still holds: {stale:?}"
        );
        drop(reopened);
        std::fs::remove_dir_all(&image).expect("remove the crash image");
    }
    let most = lags.last().copied().unwrap_or(0);
    assert!(
        most >= 2,
        "the head was rewritten on every append: {lags:?}"
    );
    assert!(most < 64, "the head was not rewritten for {most} appends");
    assert!(
        lags.contains(&0),
        "the head is rewritten now and then: {lags:?}"
    );
}
