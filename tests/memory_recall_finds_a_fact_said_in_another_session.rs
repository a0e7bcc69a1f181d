//! A turn recalls what the same user said in another session: explicitly with
//! `TurnContext::recall`, and automatically (the input as query) inside its
//! `<memory-context>` block.

mod support;

use std::sync::Arc;

use support::harness::*;
use support::memory::MemoryAgent;
use turnstile::memory::InMemory;
use turnstile::{Ingest, MemoryOptions, Runtime};

#[tokio::test]
async fn a_fact_from_monday_is_recalled_on_tuesday() {
    let agent = Arc::new(MemoryAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(turnstile::InMemoryStore::new())
        .with_memory(
            InMemory::new(),
            MemoryOptions {
                ingest: Ingest::Explicit,
                auto_recall: Some(3),
            },
        )
        .build()
        .unwrap();
    let monday = key("ada", "monday");
    let tuesday = key("ada", "tuesday");
    within(rt.call(&monday, "my order number is 4471-B"))
        .await
        .unwrap();
    within(rt.call(&monday, "and the parcel is blue"))
        .await
        .unwrap();
    assert_eq!(
        within(rt.remember(&monday)).await.unwrap(),
        4,
        "two inputs, two replies"
    );
    assert_eq!(
        within(rt.remember(&monday)).await.unwrap(),
        0,
        "nothing new the second time"
    );

    within(rt.call(&tuesday, "recall: order number"))
        .await
        .unwrap();
    let seen = agent.last(&tuesday);
    assert!(!seen.recalled.is_empty(), "recall found nothing");
    let best = &seen.recalled[0];
    assert_eq!(best.entry.key, monday, "it comes from the other session");
    assert!(best.entry.text.contains("4471-B"));
    // Auto-recall with the input put it in the block, which opens the chat messages.
    let block = seen.block.expect("a memory block");
    assert!(
        block.contains("4471-B") && block.contains("monday"),
        "{block}"
    );
    assert_eq!(seen.first_message.as_deref(), Some(block.as_str()));

    // A question with no word in common recalls nothing, and the turn has no block.
    within(rt.call(&tuesday, "hello there")).await.unwrap();
    assert!(agent.last(&tuesday).block.is_none());
    let memory = rt.memory().expect("memory");
    let hits = memory.search("ada", "parcel", 5).await.unwrap();
    assert_eq!(hits.len(), 2, "the input and the agent's echo of it");
}
