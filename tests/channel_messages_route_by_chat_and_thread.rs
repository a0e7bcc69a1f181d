//! Channel routing, as a bot embeds it without HTTP: a chat is one session whoever speaks in
//! it, each thread is its own session, senders resolve to one canonical user across channels,
//! and by default a newer message in a chat wins.

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use support::harness::*;
use turnstile::state::{EventKind, InterruptReason};
use turnstile::{
    channel::ChannelMessage, channel::ChannelRouter, channel::MemoryPairingStore, Agent,
    AgentError, CallOptions, InMemoryStore, OutcomeKind, OverlapPolicy, Runtime, Store,
    TurnContext,
};

/// Answers with who spoke (the canonical user from the turn's attributes) and what they said.
struct WhoAgent;

#[async_trait]
impl Agent for WhoAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let user = turn
            .attribute("user")
            .and_then(|v| v.as_str())
            .unwrap_or("?");
        Ok(format!("{user}: {}", turn.input()))
    }
}

fn router(agent: impl Agent) -> (ChannelRouter, Arc<dyn Store>) {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let runtime = Runtime::builder()
        .agent(agent)
        .store_arc(store.clone())
        .build()
        .unwrap();
    (
        ChannelRouter::new(runtime, MemoryPairingStore::new()),
        store,
    )
}

#[tokio::test]
async fn two_users_in_one_chat_share_one_session() {
    // Property: the sender is not part of the key, so a group chat's messages form one history.
    let (router, store) = router(WhoAgent);
    let first = router
        .send(ChannelMessage::new("slack", "C1", "U1", "hello"))
        .await
        .unwrap();
    let second = router
        .send(ChannelMessage::new("slack", "C1", "U2", "hi all"))
        .await
        .unwrap();
    assert_eq!(first.route.key, second.route.key);
    assert_eq!(first.route.key.user_id(), "channel:slack");
    assert_eq!(first.route.key.session_id(), "slack|C1");
    assert_eq!(second.outcome.output, "U2@slack: hi all");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &first.route.key)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["hello", "hi all"]);
}

#[tokio::test]
async fn two_threads_of_one_chat_are_two_sessions() {
    // Property: each thread is a session of its own, apart from the chat outside threads.
    let (router, _) = router(WhoAgent);
    let message = |thread: Option<&str>| {
        let m = ChannelMessage::new("slack", "C1", "U1", "x");
        match thread {
            Some(t) => m.in_thread(t),
            None => m,
        }
    };
    let a = router.route(&message(Some("T1"))).await.unwrap().key;
    let b = router.route(&message(Some("T2"))).await.unwrap().key;
    let chat = router.route(&message(None)).await.unwrap().key;
    assert_ne!(a, b);
    assert_ne!(a, chat);
    assert_eq!(a.session_id(), "slack|C1|T1");
    let reply = router.send(message(Some("T1"))).await.unwrap();
    assert_eq!(reply.outcome.seq, 2, "the thread's history starts empty");
}

#[tokio::test]
async fn a_paired_user_is_one_person_on_every_channel() {
    // Property: accounts paired with one canonical user are resolved to it on each channel;
    // an unpaired sender gets `<channel_user>@<channel>`.
    let (router, _) = router(WhoAgent);
    router.pair("slack", "U1", "alice").await.unwrap();
    router.pair("discord", "d-77", "alice").await.unwrap();
    let slack = router
        .send(ChannelMessage::new("slack", "C1", "U1", "from slack"))
        .await
        .unwrap();
    let discord = router
        .send(ChannelMessage::new("discord", "G9", "d-77", "from discord"))
        .await
        .unwrap();
    assert_eq!(
        (slack.route.user.as_str(), slack.route.paired),
        ("alice", true)
    );
    assert_eq!(discord.outcome.output, "alice: from discord");
    assert_ne!(
        slack.route.key, discord.route.key,
        "different chats stay apart"
    );
    router.unpair("slack", "U1").await.unwrap();
    let after = router
        .route(&ChannelMessage::new("slack", "C1", "U1", "x"))
        .await
        .unwrap();
    assert_eq!((after.user.as_str(), after.paired), ("U1@slack", false));
}

#[tokio::test]
async fn a_newer_message_in_a_chat_supersedes_the_running_one_by_default() {
    // Property: channel messages default to `Latest`; the interrupted message stays in the
    // history. With `Queue` configured, the newer one waits instead.
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let runtime = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .build()
        .unwrap();
    let router = ChannelRouter::new(runtime, MemoryPairingStore::new());
    let first = tokio::spawn({
        let router = router.clone();
        async move {
            router
                .send(ChannelMessage::new("web", "room", "a", "hold on"))
                .await
        }
    });
    eventually("the first turn runs", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let second = within(router.send(ChannelMessage::new("web", "room", "b", "actually")))
        .await
        .unwrap();
    assert_eq!(second.outcome.kind, OutcomeKind::Completed);
    let first = within(first).await.unwrap().unwrap();
    assert_eq!(
        first.outcome.kind,
        OutcomeKind::Interrupted(InterruptReason::Superseded)
    );
    let kept = support::harness::stored_events(store.as_ref(), &first.route.key)
        .await
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::UserInput { text, .. } if text == "hold on"))
        .count();
    assert_eq!(kept, 1, "the superseded message is in the history");

    let queued = router.clone().with_policy(OverlapPolicy::Queue);
    assert_eq!(queued.policy(), OverlapPolicy::Queue);
    let held = tokio::spawn({
        let queued = queued.clone();
        async move {
            queued
                .send(ChannelMessage::new("web", "room2", "a", "hold 2"))
                .await
        }
    });
    eventually("the held turn runs", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) == 2
    })
    .await;
    let waiting = tokio::spawn({
        let queued = queued.clone();
        async move {
            queued
                .send_with(
                    ChannelMessage::new("web", "room2", "b", "next"),
                    CallOptions::default(),
                )
                .await
        }
    });
    let key = turnstile::channel::channel_session_key("web", "room2", None).unwrap();
    eventually("the second waits", || queued.runtime().pending(&key) == 2).await;
    agent.gate.add_permits(1);
    assert_eq!(
        within(held).await.unwrap().unwrap().outcome.kind,
        OutcomeKind::Completed
    );
    assert_eq!(
        within(waiting).await.unwrap().unwrap().outcome.kind,
        OutcomeKind::Completed
    );
}

#[tokio::test]
async fn bad_channel_fields_are_refused_before_anything_runs() {
    // Property: an invalid channel name, chat, thread or sender is a ChannelError naming the
    // field, and no session is created.
    let (router, store) = router(WhoAgent);
    for (message, field) in [
        (
            ChannelMessage::new("sl ack", "C1", "U1", "x"),
            "channel name",
        ),
        (ChannelMessage::new("slack", "", "U1", "x"), "chat id"),
        (
            ChannelMessage::new("slack", "C1", "U1", "x").in_thread("t\u{7}"),
            "thread id",
        ),
        (
            ChannelMessage::new("slack", "C1", "", "x"),
            "channel user id",
        ),
    ] {
        let err = router.send(message).await.unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
    }
    assert!(store
        .list("channel:slack", &Default::default())
        .await
        .unwrap()
        .sessions
        .is_empty());
    assert!(router.pair("slack", "U1", "channel:web").await.is_err());
}
