//! An empty query or `k = 0` (or above the limit) is a clear, typed error — from a turn's
//! `recall`, from `Runtime::search_memory` and for `auto_recall` at build time.

mod support;

use support::harness::*;
use turnstile::memory::{InMemory, MAX_K};
use turnstile::{BuildError, EchoAgent, Error, MemoryError, MemoryOptions, Runtime, TurnContext};

#[tokio::test]
async fn empty_queries_and_bad_k_are_refused() {
    let (turn, _) = TurnContext::builder(key("max", "s"))
        .memory(std::sync::Arc::new(InMemory::new()), None)
        .build();
    let empty = turn.recall("  ...  ", 3).await.unwrap_err();
    assert!(matches!(empty, MemoryError::EmptyQuery), "{empty}");
    assert!(empty.to_string().contains("at least one word"));
    let zero = turn.recall("anything", 0).await.unwrap_err();
    assert!(matches!(zero, MemoryError::InvalidK { k: 0 }), "{zero}");
    let many = turn.recall("anything", MAX_K + 1).await.unwrap_err();
    assert!(matches!(many, MemoryError::InvalidK { .. }), "{many}");
    // Without a memory store the arguments are still checked.
    let (bare, _) = TurnContext::builder(key("max", "s")).build();
    assert!(bare.recall("", 1).await.is_err());
    assert!(bare.recall("fine", 1).await.unwrap().is_empty());

    let options = MemoryOptions::default();
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(turnstile::InMemoryStore::new())
        .with_memory(InMemory::new(), options)
        .build()
        .unwrap();
    let err = rt.search_memory("max", "", 3).await.unwrap_err();
    assert!(matches!(&err, Error::Memory(inner) if matches!(**inner, MemoryError::EmptyQuery)));
    assert_eq!(err.code(), "memory");
    let err = rt.search_memory("max", "word", 0).await.unwrap_err();
    assert!(
        matches!(&err, Error::Memory(inner) if matches!(**inner, MemoryError::InvalidK { .. }))
    );

    let refused = Runtime::builder()
        .agent(EchoAgent)
        .store(turnstile::InMemoryStore::new())
        .with_memory(
            InMemory::new(),
            MemoryOptions {
                auto_recall: Some(0),
                ..options
            },
        )
        .build()
        .unwrap_err();
    assert!(matches!(refused, BuildError::InvalidConfig(m) if m.contains("auto_recall")));
}
