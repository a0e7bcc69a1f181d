//! Durable before acknowledged, answered at most once: `serve --channels` is killed (SIGKILL)
//! after acknowledging two Telegram updates — one whose reply was already posted and streaming,
//! one not answered at all — and started again over the same folder. Each chat then shows its
//! whole reply in exactly one message (the posted one is edited, not posted again), and each
//! message is in its session once.

#![cfg(feature = "http")]

mod support;

use support::channels::{channels_file, deliver, request, FakePlatform, SECRETS, TELEGRAM_SECRET};
use support::harness::eventually;
use support::serve::Serve;

const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

async fn session_events(serve: &Serve, chat: &str) -> Vec<serde_json::Value> {
    let events: serde_json::Value = reqwest::Client::new()
        .get(serve.url(&format!(
            "/v1/sessions/channel:telegram/telegram%7C{chat}/events"
        )))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    events["events"].as_array().unwrap().clone()
}

fn count(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"]["type"] == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_acknowledged_before_a_kill_are_answered_once_after_the_restart() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(
        dir.path(),
        &format!(
            "[telegram]\nbot_token_env = \"TEST_TELEGRAM_TOKEN\"\n\
             secret_token_env = \"TEST_TELEGRAM_SECRET\"\napi_base = \"{}\"\n\
             edit_interval_ms = 100\n",
            fake.base
        ),
    );
    let store = format!("file:{}", dir.path().join("data").display());
    let channels = ["--channels", file.to_str().unwrap()];
    // Turns of 8 s in 8 chunks: the first chunk (and the first post) after about a second, the
    // first edit after two.
    let mut first = Serve::start_with_env(&store, 8_000, 8, &channels, &SECRETS);
    let webhook = first.url("/channels/telegram/webhook");
    let streaming = request(&["telegram-update", "800", "555", "42", "first question"]);
    let (status, _) = deliver(&webhook, &streaming, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200);
    // An edit comes only after the posted message's id is kept in the inbox.
    eventually("the first reply is posted and edited", || {
        !fake.done("editMessageText").is_empty()
    })
    .await;
    let unanswered = request(&["telegram-update", "801", "556", "43", "second question"]);
    let (status, _) = deliver(&webhook, &unanswered, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200);
    first.kill();
    let posted_before = fake.shown("555");
    assert_eq!(posted_before.len(), 1);
    assert!(
        !posted_before[0].ends_with("to: first question"),
        "the reply was still streaming at the kill: {posted_before:?}"
    );

    let second = Serve::start_with_env(&store, 200, 2, &channels, &SECRETS);
    eventually("both replies are whole", || {
        let done = |chat: &str, input: &str| {
            fake.shown(chat)
                .first()
                .is_some_and(|t| t.ends_with(&format!("to: {input}")))
        };
        done("555", "first question") && done("556", "second question")
    })
    .await;
    assert_eq!(fake.shown("555").len(), 1, "{:?}", fake.calls());
    assert_eq!(fake.shown("556").len(), 1, "{:?}", fake.calls());
    assert_eq!(fake.done("sendMessage").len(), 2, "{:?}", fake.calls());
    for chat in ["555", "556"] {
        let events = session_events(&second, chat).await;
        assert_eq!(count(&events, "user_input"), 1, "{events:?}");
        assert_eq!(count(&events, "agent_output"), 1, "{events:?}");
    }
    // Telegram retries the first update after the restart: acknowledged, nothing more.
    let webhook = second.url("/channels/telegram/webhook");
    let (status, _) = deliver(&webhook, &streaming, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200);
    let events = session_events(&second, "555").await;
    assert_eq!(count(&events, "user_input"), 1, "{events:?}");
    assert_eq!(fake.done("sendMessage").len(), 2);
}
