//! Property: every command reaches the PostgreSQL store through `--store postgres://…`: a
//! `turnstile load` run writes to it and verifies every acknowledged turn, and the `turnstile
//! sessions` commands (list, show, export, import, gc, delete-user) work on what it wrote;
//! `delete-user` also removes the user's artifacts from the folder `--artifacts file:DIR` names.
#![cfg(feature = "postgres")]

mod support;

use serde_json::Value;
use support::cli::{turnstile, turnstile_json, Run};
use support::postgres::TestDatabase;
use turnstile::artifact::ArtifactScope;
use turnstile::backend::FileArtifactStore;
use turnstile::backend::PostgresOptions;
use turnstile::store::PageRequest;
use turnstile::{ArtifactStore, SessionKey, Store};

/// Sessions in the store, over the users a load run writes.
async fn count_sessions(store: &dyn Store) -> usize {
    let mut total = 0;
    for user in ["user0", "user1", "user2"] {
        let page = store
            .list(user, &PageRequest::default())
            .await
            .expect("list");
        total += page.sessions.len();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_and_every_sessions_command_work_on_postgres() {
    let database = TestDatabase::create().await;
    let url = format!("{}?schema=cli", database.url());
    let sessions = |args: &[&str]| -> Run {
        turnstile(&[&["sessions", "--store", url.as_str()], args].concat())
    };
    let sessions_json = |args: &[&str]| -> (Run, Value) {
        turnstile_json(&[&["sessions", "--json", "--store", url.as_str()], args].concat())
    };

    let (run, report) = turnstile_json(&[
        "load",
        "--store",
        &url,
        "--sessions=3",
        "--turns=4",
        "--concurrency=3",
        "--agent=echo",
        "--json",
    ]);
    assert!(run.success, "load: {}\n{report:#}", run.stderr);
    assert_eq!(report["turns_ok"], 12, "{report:#}");
    let store = database
        .store_with(PostgresOptions::default().with_schema("cli"))
        .await;
    assert_eq!(count_sessions(&store).await, 3);

    // list: user0's session, with its statistics.
    let (run, page) = sessions_json(&["list", "--user", "user0"]);
    assert!(run.success, "{}", run.stderr);
    let listed = page["sessions"].as_array().expect("sessions");
    assert_eq!(listed.len(), 1, "{page:#}");
    assert_eq!(listed[0]["stats"]["turns"], 4, "{page:#}");
    let key: SessionKey = listed[0]["key"]
        .as_str()
        .expect("a key")
        .parse()
        .expect("a canonical key");
    let key_arg = key.to_string();

    // show: head and statistics.
    let shown = sessions(&["show", &key_arg]);
    assert!(shown.success, "{}", shown.stderr);
    assert!(
        shown.stdout.contains(&format!("session       {key_arg}")),
        "{}",
        shown.stdout
    );

    // export, then import over the existing session (refused), delete, import: the same events.
    let dir = tempfile::tempdir().expect("tempdir");
    let doc = dir.path().join("export.json");
    let doc_arg = doc.to_string_lossy().into_owned();
    let export = sessions(&["export", &key_arg, "-o", &doc_arg]);
    assert!(export.success, "{}", export.stderr);
    let before = store.read_events(&key, 1, usize::MAX).await.expect("read");
    assert_eq!(before.len(), 8);
    let refused = sessions(&["import", &doc_arg]);
    assert!(
        !refused.success && refused.stderr.contains("already exists"),
        "{}",
        refused.stderr
    );
    assert!(sessions(&["delete", &key_arg]).success);
    let import = sessions(&["import", &doc_arg]);
    assert!(import.success, "{}", import.stderr);
    let after = store.read_events(&key, 1, usize::MAX).await.expect("read");
    assert_eq!(after, before, "the same events, ids and times included");

    // gc: keep one session of the three.
    let (run, collected) = sessions_json(&["gc", "--max-sessions", "1"]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        collected["removed"].as_array().map(Vec::len),
        Some(2),
        "{collected:#}"
    );
    assert_eq!(count_sessions(&store).await, 1);

    // delete-user: the user of the session gc kept.
    let mut survivor = None;
    for user in ["user0", "user1", "user2"] {
        let page = store
            .list(user, &PageRequest::default())
            .await
            .expect("list");
        if !page.sessions.is_empty() {
            survivor = Some(user);
        }
    }
    let survivor = survivor.expect("gc kept one session");
    let (run, gone) = sessions_json(&["delete-user", survivor]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(gone["deleted"], 1, "{gone:#}");
    assert_eq!(count_sessions(&store).await, 0);
    // No artifact store beside PostgreSQL: none removed (`null`), and stderr says where to
    // point --artifacts.
    assert!(gone["artifacts_deleted"].is_null(), "{gone:#}");
    assert!(run.stderr.contains("--artifacts"), "{}", run.stderr);

    // With the folder `serve --artifacts file:DIR` used, the user's artifacts go too, and only
    // that user's.
    let folder = tempfile::tempdir().expect("tempdir");
    let scope = |user: &str| ArtifactScope::user(user).expect("user scope");
    {
        let artifacts = FileArtifactStore::open(folder.path()).expect("artifact folder");
        for user in [survivor, "someone-else"] {
            artifacts
                .save(&scope(user), "a.txt", b"bytes", "text/plain")
                .await
                .expect("save");
        }
    } // Dropped: the binary needs the folder's lock.
    let named = format!("file:{}", folder.path().display());
    let (run, gone) = sessions_json(&["--artifacts", &named, "delete-user", survivor]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(gone["deleted"], 0, "{gone:#}");
    assert_eq!(gone["artifacts_deleted"], 1, "{gone:#}");
    let artifacts = FileArtifactStore::open(folder.path()).expect("artifact folder");
    assert!(artifacts
        .list(&scope(survivor))
        .await
        .expect("list")
        .is_empty());
    assert_eq!(
        artifacts
            .list(&scope("someone-else"))
            .await
            .expect("list")
            .len(),
        1
    );
}
