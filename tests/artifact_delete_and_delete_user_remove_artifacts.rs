//! `Runtime::delete` removes the session's artifacts with it, and `Runtime::delete_user`
//! removes the user's own artifacts and those of all the user's sessions, touching no other
//! user's. Run on the file artifact store, so that the folders are gone too.

mod support;

use std::sync::Arc;

use turnstile::artifact::ArtifactScope;
use turnstile::backend::FileArtifactStore;
use turnstile::{ArtifactStore, InMemoryStore, Runtime};

use support::artifacts::SavingAgent;
use support::harness::key;

async fn count(store: &Arc<dyn ArtifactStore>, scope: &ArtifactScope) -> usize {
    store.list(scope).await.expect("list").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_or_a_user_takes_their_artifacts_along() {
    let folder = tempfile::tempdir().expect("temporary folder");
    let artifacts: Arc<dyn ArtifactStore> =
        Arc::new(FileArtifactStore::open(folder.path()).expect("open"));
    let rt = Runtime::builder()
        .agent(SavingAgent)
        .store(InMemoryStore::new())
        .with_artifacts(artifacts.clone())
        .build()
        .expect("runtime");
    let (s1, s2, bob) = (key("ada", "s1"), key("ada", "s2"), key("bob", "s1"));
    for k in [&s1, &s2, &bob] {
        rt.call(k, "note").await.expect("turn");
        rt.call(k, "user:shared").await.expect("turn");
    }
    let session = |k: &turnstile::SessionKey| ArtifactScope::Session(k.clone());
    let ada = ArtifactScope::user("ada").unwrap();
    let bob_user = ArtifactScope::user("bob").unwrap();
    assert_eq!(count(&artifacts, &session(&s1)).await, 1);
    assert_eq!(count(&artifacts, &ada).await, 1);

    assert!(rt.delete(&s1).await.expect("delete"));
    assert_eq!(
        count(&artifacts, &session(&s1)).await,
        0,
        "its artifacts went with it"
    );
    assert_eq!(
        count(&artifacts, &session(&s2)).await,
        1,
        "another session kept"
    );
    assert_eq!(
        count(&artifacts, &ada).await,
        1,
        "the user's own are the user's"
    );

    rt.delete_user("ada").await.expect("delete_user");
    assert_eq!(count(&artifacts, &session(&s2)).await, 0);
    assert_eq!(count(&artifacts, &ada).await, 0);
    assert!(
        !folder.path().join("users").join("ada").exists(),
        "the user's folder is gone"
    );
    assert_eq!(count(&artifacts, &session(&bob)).await, 1, "bob untouched");
    assert_eq!(count(&artifacts, &bob_user).await, 1, "bob untouched");
}
