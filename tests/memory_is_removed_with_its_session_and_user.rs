//! `Runtime::delete` removes the session's memory and `Runtime::delete_user` the user's, and
//! neither touches another user's memory.

mod support;

use support::harness::*;
use support::memory::MemoryAgent;
use turnstile::backend::FileMemory;
use turnstile::{Ingest, MemoryOptions, Runtime};

#[tokio::test]
async fn deleting_sessions_and_users_deletes_their_memory() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::builder()
        .agent(MemoryAgent::default())
        .store(turnstile::InMemoryStore::new())
        .with_memory(
            FileMemory::open(dir.path()).unwrap(),
            MemoryOptions {
                ingest: Ingest::Explicit,
                auto_recall: None,
            },
        )
        .build()
        .unwrap();
    let keys = [key("jo", "a"), key("jo", "b"), key("kim", "a")];
    for k in &keys {
        within(rt.call(k, "remember the lighthouse")).await.unwrap();
        within(rt.remember(k)).await.unwrap();
    }
    let memory = rt.memory().unwrap().clone();
    let count = |user: &'static str| {
        let memory = memory.clone();
        async move { memory.search(user, "lighthouse", 100).await.unwrap().len() }
    };
    assert_eq!((count("jo").await, count("kim").await), (4, 2));

    assert!(within(rt.delete(&keys[0])).await.unwrap());
    assert_eq!(count("jo").await, 2, "only session a's entries went");
    assert_eq!(memory.ingested_through(&keys[0]).await.unwrap(), 0);

    assert_eq!(within(rt.delete_user("jo")).await.unwrap(), 1);
    assert_eq!(count("jo").await, 0, "the user's memory is gone");
    assert_eq!(count("kim").await, 2, "another user's memory is untouched");
    let logs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().ends_with(".jsonl"))
        .collect();
    assert_eq!(
        logs.len(),
        1,
        "only kim's log is left on disk (beside the folder's lock)"
    );
}
