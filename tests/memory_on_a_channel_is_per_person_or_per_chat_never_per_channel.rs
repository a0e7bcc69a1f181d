//! Property: with memory and automatic recall, what one person says in their chat on a channel
//! never reaches another person's chat on that channel — every chat of a channel shares the
//! channel's user id, and memory is filed per chat, not per channel. A paired sender's turns
//! recall that person's own memory (what they said in their own sessions) wherever they write
//! from, and an unpaired sender's never do. Deleting the channel's namespace removes its chats'
//! memory.

mod support;

use std::sync::Arc;

use support::harness::*;
use support::memory::MemoryAgent;
use turnstile::channel::{channel_session_key, ChannelMessage, ChannelRouter, MemoryPairingStore};
use turnstile::memory::InMemory;
use turnstile::{Ingest, MemoryOptions, Runtime};

fn runtime(agent: Arc<MemoryAgent>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store(turnstile::InMemoryStore::new())
        .with_memory(
            InMemory::new(),
            MemoryOptions {
                ingest: Ingest::Explicit,
                auto_recall: Some(5),
            },
        )
        .build()
        .unwrap()
}

fn block(agent: &MemoryAgent, chat: &str) -> String {
    let key = channel_session_key("web", chat, None).unwrap();
    agent.last(&key).block.unwrap_or_default()
}

#[tokio::test]
async fn one_persons_chat_never_reaches_another_persons_chat() {
    let agent = Arc::new(MemoryAgent::default());
    let rt = runtime(agent.clone());
    let router = ChannelRouter::new(rt.clone(), MemoryPairingStore::new());
    let say = |chat: &str, who: &str, text: &str| {
        let router = router.clone();
        let message = ChannelMessage::new("web", chat, who, text);
        async move { within(router.send(message)).await.unwrap() }
    };

    say("dm-u1", "u1", "my private codeword is zebra42").await;
    rt.remember(&channel_session_key("web", "dm-u1", None).unwrap())
        .await
        .unwrap();
    say("dm-u2", "u2", "what is the codeword").await;
    assert!(
        !block(&agent, "dm-u2").contains("zebra42"),
        "u2 saw u1's private chat: {}",
        block(&agent, "dm-u2")
    );
    say("dm-u1", "u1", "remind me of the codeword").await;
    assert!(
        block(&agent, "dm-u1").contains("zebra42"),
        "a chat recalls what was said in it: {}",
        block(&agent, "dm-u1")
    );

    // Alice said something in her own session; on the channel she is paired as u3.
    let alice = key("alice", "app");
    within(rt.call(&alice, "my favourite colour is teal"))
        .await
        .unwrap();
    rt.remember(&alice).await.unwrap();
    router.pair("web", "u3", "alice").await.unwrap();
    say("dm-u3", "u3", "which favourite colour did I name").await;
    assert!(
        block(&agent, "dm-u3").contains("teal"),
        "a paired sender's memory follows them: {}",
        block(&agent, "dm-u3")
    );
    say("dm-u2", "u2", "which favourite colour did I name").await;
    assert!(
        !block(&agent, "dm-u2").contains("teal"),
        "an unpaired sender never reaches a person's memory: {}",
        block(&agent, "dm-u2")
    );
    assert!(
        !block(&agent, "dm-u3").contains("zebra42"),
        "nor the paired one another chat's"
    );

    rt.delete_user("channel:web").await.unwrap();
    let left = rt
        .search_memory("channel:web|dm-u1", "codeword", 5)
        .await
        .unwrap();
    assert!(left.is_empty(), "the chat's memory went with it: {left:?}");
    let alices = rt.search_memory("alice", "teal", 5).await.unwrap();
    assert!(!alices.is_empty(), "a person's own memory stays");
}
