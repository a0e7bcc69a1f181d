//! Property: `turnstile sessions delete` and `delete-user` remove artifacts along with the
//! sessions, from the artifact store `serve --artifacts auto` keeps beside the same `--store`
//! (a file store's `artifacts/` folder, the same Redis), as `Runtime::delete` and
//! `delete_user` do: the session's own for `delete`; the user's own and every session's for
//! `delete-user`. Other users' artifacts stay. `--json` counts the versions removed in
//! `artifacts_deleted` (`null` with `--artifacts off`, which leaves them).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use support::artifacts::SavingAgent;
use support::cli::{turnstile, turnstile_json, Run};
use support::harness::{eventually_ok, key};
use turnstile::artifact::ArtifactScope;
use turnstile::backend::FileArtifactStore;
use turnstile::backend::FileStore;
use turnstile::{ArtifactStore, Runtime, SessionKey, Store};

/// The sessions every test writes: two of ada, one of bob, one of carol.
fn keys() -> [SessionKey; 4] {
    [
        key("ada", "s1"),
        key("ada", "s2"),
        key("bob", "b1"),
        key("carol", "c1"),
    ]
}

/// Runs two turns in each session of [`keys`]: one saves the session's `note.txt`, one the
/// user's `shared.txt`. Then drains, so that the store and artifact store can be dropped.
async fn seed(store: Arc<dyn Store>, artifacts: Arc<dyn ArtifactStore>) {
    let rt = Runtime::builder()
        .agent(SavingAgent)
        .store_arc(store)
        .with_artifacts(artifacts)
        .build()
        .expect("runtime");
    for k in &keys() {
        rt.call(k, "note").await.expect("turn");
        rt.call(k, "user:shared").await.expect("turn");
    }
    rt.shutdown().await;
}

/// How many names each scope holds: `[ada/s1, ada/s2, ada, bob/b1, bob, carol/c1, carol]`.
async fn counts(artifacts: &dyn ArtifactStore) -> [usize; 7] {
    let [s1, s2, b1, c1] = keys();
    let scopes = [
        ArtifactScope::Session(s1),
        ArtifactScope::Session(s2),
        ArtifactScope::user("ada").expect("user"),
        ArtifactScope::Session(b1),
        ArtifactScope::user("bob").expect("user"),
        ArtifactScope::Session(c1),
        ArtifactScope::user("carol").expect("user"),
    ];
    let mut out = [0; 7];
    for (n, scope) in out.iter_mut().zip(&scopes) {
        *n = artifacts.list(scope).await.expect("list").len();
    }
    out
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}):\n{}\n{}", run.stdout, run.stderr))
}

/// Opens the file artifact folder briefly (the binary needs its lock) and counts. The folder
/// may still be locked for a moment by what last had it open (a runtime's last task letting
/// go of it after `shutdown`, a CLI process exiting): waited for, with a deadline.
async fn file_counts(folder: &Path) -> [usize; 7] {
    let artifacts = eventually_ok(
        "the artifact folder unlocked",
        Duration::from_millis(5),
        || async { FileArtifactStore::open(folder) },
    )
    .await;
    counts(&artifacts).await
}

/// A file store in `dir/store` with its artifact folder beside it, seeded by [`seed`] and
/// closed again (the binary needs their locks); returns the two paths.
async fn seeded_file_store(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("store");
    let folder = root.join("artifacts");
    let store = FileStore::open(&root).expect("open the store");
    let artifacts = FileArtifactStore::open(&folder).expect("open the artifact folder");
    seed(Arc::new(store), Arc::new(artifacts)).await;
    // Both let go of before the binary is run on them (see `file_counts`).
    eventually_ok("the store unlocked", Duration::from_millis(5), || async {
        FileStore::open(&root)
    })
    .await;
    file_counts(&folder).await;
    (root, folder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_removes_artifacts_beside_a_file_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, folder) = seeded_file_store(dir.path()).await;
    assert_eq!(file_counts(&folder).await, [1, 1, 1, 1, 1, 1, 1]);
    let store = format!("file:{}", root.display());
    let cli = |args: &[&str]| turnstile(&[&["sessions", "--store", &store], args].concat());

    // delete: the session and its own artifacts; the user's and the other session's stay.
    let run = cli(&["--json", "delete", "ada/s1"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        json_of(&run),
        json!({ "key": "ada/s1", "deleted": true, "artifacts_deleted": 1 })
    );
    assert_eq!(file_counts(&folder).await, [0, 1, 1, 1, 1, 1, 1]);

    // A second delete finds neither and fails, as before.
    let run = cli(&["--json", "delete", "ada/s1"]);
    assert!(!run.success, "nothing left to delete");
    assert_eq!(json_of(&run)["artifacts_deleted"], 0);

    // delete-user: every session of the user, the user's own artifacts and its sessions'
    // (ada's `shared.txt` has two versions, one saved from each session).
    let run = cli(&["delete-user", "ada"]);
    assert!(run.success, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("deleted 1 sessions of user \"ada\", 3 artifact versions"),
        "{}",
        run.stdout
    );
    assert_eq!(file_counts(&folder).await, [0, 0, 0, 1, 1, 1, 1]);

    // --artifacts off: the session goes, its artifacts stay, and the answer says none went.
    let (run, off) = turnstile_json(&[
        "sessions",
        "--store",
        &store,
        "--json",
        "--artifacts",
        "off",
        "delete",
        "carol/c1",
    ]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(off["deleted"], true);
    assert!(off["artifacts_deleted"].is_null(), "{off:#}");
    assert_eq!(file_counts(&folder).await, [0, 0, 0, 1, 1, 1, 1]);

    // --artifacts memory would be this command's own, empty memory: refused, nothing deleted.
    let run = cli(&["--artifacts", "memory", "delete-user", "bob"]);
    assert!(!run.success, "{}", run.stdout);
    assert!(run.stderr.contains("--artifacts memory"), "{}", run.stderr);
    assert_eq!(file_counts(&folder).await, [0, 0, 0, 1, 1, 1, 1]);

    // --artifacts file:DIR names the same folder explicitly: carol's artifacts go without a
    // session left to delete.
    let named = format!("file:{}", folder.display());
    let run = cli(&["--json", "--artifacts", &named, "delete-user", "carol"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        json_of(&run),
        json!({ "user": "carol", "deleted": 0, "artifacts_deleted": 2 })
    );
    assert_eq!(
        file_counts(&folder).await,
        [0, 0, 0, 1, 1, 0, 0],
        "bob's are intact"
    );
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_removes_artifacts_kept_in_the_same_redis() {
    use support::redis_server::RedisServer;
    use turnstile::backend::RedisArtifactStore;
    use turnstile::backend::{open_store, RedisOptions, StoreUrl};

    let server = RedisServer::start();
    let url = server.url().to_owned();
    let connect = || async {
        RedisArtifactStore::connect(&url, &RedisOptions::default())
            .await
            .expect("connect the artifact store")
    };
    let opened = open_store(&url.parse::<StoreUrl>().expect("a store URL"))
        .await
        .expect("open the store");
    seed(opened.store().clone(), Arc::new(connect().await)).await;
    assert_eq!(counts(&connect().await).await, [1, 1, 1, 1, 1, 1, 1]);
    let cli = |args: &[&str]| turnstile(&[&["sessions", "--json", "--store", &url], args].concat());

    let run = cli(&["delete", "ada/s2"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(json_of(&run)["artifacts_deleted"], 1);
    assert_eq!(counts(&connect().await).await, [1, 0, 1, 1, 1, 1, 1]);

    let run = cli(&["delete-user", "ada"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        json_of(&run),
        json!({ "user": "ada", "deleted": 1, "artifacts_deleted": 3 })
    );
    assert_eq!(
        counts(&connect().await).await,
        [0, 0, 0, 1, 1, 1, 1],
        "bob's and carol's are intact"
    );
}

/// `gc` removes the artifacts of the sessions it removes, and only theirs: users' own
/// artifacts and the kept sessions' stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_the_artifacts_of_the_sessions_it_removes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, folder) = seeded_file_store(dir.path()).await;
    let store = format!("file:{}", root.display());
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "--json",
        "gc",
        "--max-sessions",
        "2",
    ]);
    assert!(run.success, "{}", run.stderr);
    let answer = json_of(&run);
    let removed: Vec<String> = answer["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .map(|k| k.as_str().expect("a key").to_owned())
        .collect();
    assert_eq!(removed.len(), 2, "{answer:#}");
    // One version of `note.txt` per removed session.
    assert_eq!(answer["artifacts_deleted"], 2, "{answer:#}");

    // Per scope, [ada/s1, ada/s2, ada, bob/b1, bob, carol/c1, carol]: a removed session's own
    // name is gone, everything else stays.
    let sessions = [(0, "ada/s1"), (1, "ada/s2"), (3, "bob/b1"), (5, "carol/c1")];
    let mut expected = [1; 7];
    for (at, key) in sessions {
        if removed.iter().any(|k| k == key) {
            expected[at] = 0;
        }
    }
    assert_eq!(file_counts(&folder).await, expected, "removed {removed:?}");
}
