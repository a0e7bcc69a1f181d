//! A turn that saves an artifact records `artifact_saved {name, version, bytes, mime}` in the
//! session's log, before the turn's output; each save is one version more, and every older
//! version stays loadable from the artifact store. A head that folded such an event says schema
//! version 2, so a build that knows only version 1 refuses it as newer instead of failing on an
//! event kind it does not know.

mod support;

use std::sync::Arc;

use turnstile::artifact::{ArtifactScope, MemoryArtifactStore};
use turnstile::state::{Author, EventKind};
use turnstile::{ArtifactStore, InMemoryStore, Runtime, Store};

use support::artifacts::SavingAgent;
use support::harness::{key, stored_events};

#[tokio::test]
async fn each_save_is_an_event_and_old_versions_stay_loadable() {
    let store = Arc::new(InMemoryStore::new());
    let artifacts: Arc<dyn ArtifactStore> = Arc::new(MemoryArtifactStore::new());
    let rt = Runtime::builder()
        .agent(SavingAgent)
        .store_arc(store.clone())
        .with_artifacts(artifacts.clone())
        .build()
        .expect("runtime");
    let k = key("ada", "s1");
    for (n, text) in ["first", "second"].iter().enumerate() {
        let outcome = rt.call(&k, *text).await.expect("turn");
        assert_eq!(outcome.output, format!("saved note.txt v{}", n + 1));
    }
    let events = stored_events(store.as_ref(), &k).await;
    let saved: Vec<(u64, u64, u64, &str, &str, Author)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ArtifactSaved {
                name,
                version,
                bytes,
                mime,
            } => Some((
                e.seq,
                *version,
                *bytes,
                name.as_str(),
                mime.as_str(),
                e.author,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        saved,
        [
            (2, 1, 5, "note.txt", "text/plain", Author::Agent),
            (5, 2, 6, "note.txt", "text/plain", Author::Agent)
        ],
        "one event per save, between the input and the output"
    );
    assert!(matches!(events[2].kind, EventKind::AgentOutput { .. }));
    let scope = ArtifactScope::Session(k.clone());
    for (version, text) in [(1, "first"), (2, "second")] {
        let loaded = artifacts
            .load(&scope, "note.txt", Some(version))
            .await
            .unwrap();
        assert_eq!(loaded.expect("kept").data, text.as_bytes());
    }
    let head = store.load(&k, 0).await.unwrap().record.expect("stored");
    assert_eq!(
        head.schema_version, 2,
        "artifacts need version 2, and nothing in this session needs more"
    );
}

#[tokio::test]
async fn a_session_without_artifacts_keeps_schema_version_one() {
    let store = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(turnstile::EchoAgent)
        .store_arc(store.clone())
        .build()
        .expect("runtime");
    let k = key("ada", "plain");
    rt.call(&k, "hello").await.expect("turn");
    let head = store.load(&k, 0).await.unwrap().record.expect("stored");
    assert_eq!(head.schema_version, 1, "older builds still read it");
}

#[tokio::test]
async fn without_an_artifact_store_a_save_fails_the_turn_clearly() {
    let rt = Runtime::builder()
        .agent(SavingAgent)
        .store(InMemoryStore::new())
        .build()
        .expect("runtime");
    let err = rt.call(&key("ada", "s1"), "x").await.unwrap_err();
    assert!(err.to_string().contains("with_artifacts"), "{err}");
}
