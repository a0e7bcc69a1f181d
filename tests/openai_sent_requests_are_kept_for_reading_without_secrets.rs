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
use turnstile::{InMemoryStore, OpenAiAgent, Runtime, Tool, ToolError};

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

fn runtime(fake: &FakeOpenAi, keep: Option<usize>) -> Runtime {
    let agent = OpenAiAgent::builder(&fake.base_url, "m-sent")
        .with_api_key(KEY)
        .with_header("x-gateway-key", GATEWAY)
        .with_tool(Clock)
        .build()
        .unwrap();
    let builder = Runtime::builder()
        .agent(agent)
        .store_arc(Arc::new(InMemoryStore::new()));
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

    let kept = rt
        .sent_requests(&k, outcome.seq)
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
    assert!(rt.sent_requests(&k, outcome.seq - 1).is_none());
    assert!(rt
        .sent_requests(&key("ada", "other"), outcome.seq)
        .is_none());
    // A deleted session's requests are let go with it.
    within(rt.delete(&k)).await.unwrap();
    assert!(rt.sent_requests(&k, outcome.seq).is_none());
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
    let kept: Vec<bool> = seqs
        .iter()
        .map(|seq| rt.sent_requests(&k, *seq).is_some())
        .collect();
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
    assert!(none.sent_requests(&k, outcome.seq).is_none());
}
