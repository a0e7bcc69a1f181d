//! The exact requests a turn sent its model are kept, for a while, by the process that ran it
//! (`Runtime::sent_requests`): each round's body as sent (messages, tools, options), its URL
//! and the headers turnstile set — with the API key and the gateway's header values redacted
//! wherever they appear, while the model itself got them whole. A tool turn keeps both its
//! rounds; the oldest turns go first past the budget; a deleted session's are let go.

#![cfg(feature = "openai")]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::fake_openai::{FakeOpenAi, Reply};
use support::harness::*;
use turnstile::agent::SentRequest;
use turnstile::{InMemoryStore, OpenAiAgent, Runtime, SessionKey, Store, Tool, ToolError};

const KEY: &str = "sk-test-0123456789abcdefXYZ";
const GATEWAY: &str = "gateway-secret-4242-abcd";

struct Clock;

#[async_trait]
impl Tool for Clock {
    fn name(&self) -> &str {
        "clock"
    }
    fn description(&self) -> &str {
        "The time"
    }
    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {} })
    }
    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(json!("noon"))
    }
}

async fn sent(rt: &Runtime, k: &SessionKey, seq: u64) -> Option<Arc<[SentRequest]>> {
    within(rt.sent_requests(k, seq))
        .await
        .expect("the store answers")
}

fn runtime(fake: &FakeOpenAi, keep: Option<usize>) -> Runtime {
    runtime_on(fake, keep, Arc::new(InMemoryStore::new()))
}

fn runtime_on(fake: &FakeOpenAi, keep: Option<usize>, store: Arc<InMemoryStore>) -> Runtime {
    let agent = OpenAiAgent::builder(&fake.base_url, "m-sent")
        .with_api_key(KEY)
        .with_header("x-gateway-key", GATEWAY)
        .with_tool(Clock)
        .build()
        .unwrap();
    let builder = Runtime::builder().agent(agent).store_arc(store);
    match keep {
        Some(bytes) => builder.keep_sent_requests(bytes),
        None => builder,
    }
    .build()
    .unwrap()
}

#[tokio::test]
async fn a_turns_requests_are_kept_as_sent_with_secrets_redacted() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![("c1".into(), "clock".into(), "{}".into())]),
        Reply::text(&["it is noon"]),
    ])
    .await;
    let rt = runtime(&fake, None);
    let k = key("ada", "sent");
    let input = format!("my key is {KEY} and the gateway's is {GATEWAY}; what time is it?");
    let outcome = within(rt.call(&k, &input)).await.unwrap();

    let kept = sent(&rt, &k, outcome.seq)
        .await
        .expect("the turn's requests are kept");
    assert_eq!(kept.len(), 2, "one request per round: {kept:?}");
    let received = fake.requests();
    for (round, (sent, got)) in kept.iter().zip(&received).enumerate() {
        assert_eq!(sent.round, round as u32 + 1);
        assert_eq!(sent.method, "POST");
        assert!(sent.url.ends_with("/v1/chat/completions"), "{}", sent.url);
        assert!(!sent.truncated);
        assert_eq!(
            sent.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("authorization".to_owned(), "Bearer [redacted]".to_owned()),
                ("x-gateway-key".to_owned(), "[redacted]".to_owned()),
            ]
        );
        assert!(!sent.body.contains(KEY) && !sent.body.contains(GATEWAY));
        // What was kept is what the model got, but for the secrets.
        let body: Value = serde_json::from_str(&sent.body).expect("the body is the JSON sent");
        let unredacted = serde_json::to_string(got)
            .unwrap()
            .replace(KEY, "[redacted]")
            .replace(GATEWAY, "[redacted]");
        assert_eq!(body, serde_json::from_str::<Value>(&unredacted).unwrap());
        assert_eq!(body["model"], "m-sent");
        assert_eq!(body["tools"][0]["function"]["name"], "clock");
        let asked = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .expect("the user's message");
        assert_eq!(
            asked["content"],
            "my key is [redacted] and the gateway's is [redacted]; what time is it?"
        );
    }
    // The model itself got the message whole.
    assert!(received[0].to_string().contains(KEY));
    // The second round carries the call and its result.
    let second: Value = serde_json::from_str(&kept[1].body).unwrap();
    assert!(second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "tool" && m["content"].to_string().contains("noon")));

    // Nothing for a turn that is not one, nor for another session.
    assert!(sent(&rt, &k, outcome.seq - 1).await.is_none());
    assert!(sent(&rt, &key("ada", "other"), outcome.seq).await.is_none());
    // A deleted session's requests are let go with it.
    within(rt.delete(&k)).await.unwrap();
    assert!(sent(&rt, &k, outcome.seq).await.is_none());
}

#[tokio::test]
async fn past_the_budget_the_oldest_turns_go_first() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    // Room for about two turns' requests (each some 600 bytes with its headers).
    let rt = runtime(&fake, Some(2_000));
    let k = key("ada", "budget");
    let mut seqs = Vec::new();
    for i in 0..6 {
        seqs.push(within(rt.call(&k, &format!("turn {i}"))).await.unwrap().seq);
    }
    let mut kept = Vec::new();
    for seq in &seqs {
        kept.push(sent(&rt, &k, *seq).await.is_some());
    }
    assert!(kept[5], "the newest turn is kept: {kept:?}");
    assert!(!kept[0] && !kept[1], "the oldest turns went: {kept:?}");
    let first_kept = kept.iter().position(|k| *k).unwrap();
    assert!(
        kept[first_kept..].iter().all(|k| *k),
        "newest first: {kept:?}"
    );

    // A runtime told to keep none keeps none.
    let none = runtime(&fake, Some(0));
    let outcome = within(none.call(&k, "hello")).await.unwrap();
    assert!(sent(&none, &k, outcome.seq).await.is_none());
}

#[tokio::test]
async fn a_session_made_again_elsewhere_is_not_shown_the_old_ones_requests() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let store = Arc::new(InMemoryStore::new());
    let here = runtime_on(&fake, None, store.clone());
    let there = runtime_on(&fake, None, store.clone());
    let k = key("ada", "again");
    let first = within(here.call(&k, "the first life")).await.unwrap();
    assert!(sent(&here, &k, first.seq).await.is_some());
    // Another process deletes the session and makes it again: its turn ends at the same seq.
    within(store.delete(&k)).await.unwrap();
    let again = within(there.call(&k, "the second life")).await.unwrap();
    assert_eq!(again.seq, first.seq);
    assert!(
        sent(&here, &k, first.seq).await.is_none(),
        "this process's requests belong to the deleted session"
    );
    let theirs = sent(&there, &k, again.seq)
        .await
        .expect("kept where it ran");
    assert!(theirs[0].body.contains("the second life"));
    assert!(!theirs[0].body.contains("the first life"));
}

#[tokio::test]
async fn deleting_a_user_lets_go_of_its_live_sessions_requests() {
    let fake = FakeOpenAi::start(Vec::new()).await;
    let rt = runtime(&fake, None);
    let k = key("gone", "s");
    let outcome = within(rt.call(&k, "hello")).await.unwrap();
    assert!(sent(&rt, &k, outcome.seq).await.is_some());
    within(rt.delete_user("gone")).await.unwrap();
    assert!(sent(&rt, &k, outcome.seq).await.is_none());
}
