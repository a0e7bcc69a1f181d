//! `fork` carries artifacts: the fork gets a copy of the parent's session artifacts as they
//! were at the fork point (versions saved by turns after it are left out), with the same
//! version numbers; later saves in either session do not reach the other.

mod support;

use std::sync::Arc;

use turnstile::artifact::{ArtifactScope, MemoryArtifactStore};
use turnstile::{ArtifactStore, InMemoryStore, Runtime};

use support::artifacts::SavingAgent;
use support::harness::key;

async fn versions(store: &Arc<dyn ArtifactStore>, scope: &ArtifactScope) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for meta in store.versions(scope, "note.txt").await.expect("versions") {
        let loaded = store
            .load(scope, "note.txt", Some(meta.version))
            .await
            .unwrap();
        out.push((meta.version, loaded.expect("listed").data));
    }
    out
}

#[tokio::test]
async fn a_fork_copies_the_versions_saved_up_to_its_point() {
    let artifacts: Arc<dyn ArtifactStore> = Arc::new(MemoryArtifactStore::new());
    let rt = Runtime::builder()
        .agent(SavingAgent)
        .store(InMemoryStore::new())
        .with_artifacts(artifacts.clone())
        .build()
        .expect("runtime");
    let parent = key("ada", "parent");
    for text in ["one", "two", "three"] {
        rt.call(&parent, text).await.expect("turn");
    }
    // Each turn is input, artifact_saved, output: the second turn ends at seq 6.
    let early = key("ada", "early");
    rt.fork(&parent, &early, Some(6)).await.expect("fork at 6");
    let early_scope = ArtifactScope::Session(early.clone());
    assert_eq!(
        versions(&artifacts, &early_scope).await,
        [(1, b"one".to_vec()), (2, b"two".to_vec())],
        "the fork sees versions 1 and 2, not the third saved after its point"
    );
    let whole = key("ada", "whole");
    rt.fork(&parent, &whole, None).await.expect("fork whole");
    assert_eq!(
        versions(&artifacts, &ArtifactScope::Session(whole))
            .await
            .len(),
        3
    );

    rt.call(&early, "fork's own")
        .await
        .expect("turn in the fork");
    let parent_scope = ArtifactScope::Session(parent.clone());
    assert_eq!(versions(&artifacts, &early_scope).await.len(), 3);
    assert_eq!(
        versions(&artifacts, &parent_scope).await[2].1,
        b"three".to_vec(),
        "the parent's version 3 is untouched by the fork's save"
    );
}
