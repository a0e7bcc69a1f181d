//! A user never recalls another user's memory, also when many users with the same words in
//! their memory run turns at once.

mod support;

use std::sync::Arc;

use support::harness::*;
use support::memory::MemoryAgent;
use turnstile::memory::InMemory;
use turnstile::{Ingest, MemoryOptions, Runtime};

const USERS: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_users_recall_only_their_own_codeword() {
    let agent = Arc::new(MemoryAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(turnstile::InMemoryStore::new())
        .with_memory(
            InMemory::new(),
            MemoryOptions {
                ingest: Ingest::Explicit,
                auto_recall: Some(10),
            },
        )
        .build()
        .unwrap();
    let user = |i: usize| format!("user{i}");
    for i in 0..USERS {
        let k = key(&user(i), "first");
        within(rt.call(&k, format!("my codeword is zq{i}x")))
            .await
            .unwrap();
        within(rt.remember(&k)).await.unwrap();
    }
    let turns = (0..USERS).map(|i| {
        let rt = rt.clone();
        let k = key(&user(i), "second");
        async move { rt.call(&k, "recall: codeword").await }
    });
    for outcome in within(futures::future::join_all(turns)).await {
        outcome.unwrap();
    }
    for i in 0..USERS {
        let seen = agent.last(&key(&user(i), "second"));
        assert!(!seen.recalled.is_empty(), "user {i} recalled nothing");
        for hit in &seen.recalled {
            assert_eq!(hit.entry.key.user_id(), user(i), "user {i} saw {hit:?}");
        }
        let block = seen.block.expect("auto-recall found the codeword");
        assert!(block.contains(&format!("zq{i}x")));
        for j in (0..USERS).filter(|j| *j != i) {
            assert!(
                !block.contains(&format!("zq{j}x")),
                "user {i} saw user {j}'s codeword"
            );
        }
    }
}
