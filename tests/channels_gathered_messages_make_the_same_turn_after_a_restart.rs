//! Gathering survives a crash: under `policy = "debounce"` three messages gathered into one turn
//! whose reply was streaming when `serve` was killed (SIGKILL) are, after the restart, the same
//! one turn — each message in the history once, one reply message (edited, not posted again)
//! answering the last — and not three turns or a second reply; a message arriving right after
//! the restart is not gathered into that turn but gets one of its own.

#![cfg(feature = "http")]

mod support;

use support::channels::{
    channels_file, deliver, request, FakePlatform, PlatformRequest, SECRETS, TELEGRAM_SECRET,
};
use support::harness::eventually;
use support::serve::Serve;

const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gathered_turn_killed_mid_reply_is_the_same_turn_after_the_restart() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(
        dir.path(),
        &format!(
            "[telegram]\nbot_token_env = \"TEST_TELEGRAM_TOKEN\"\n\
             secret_token_env = \"TEST_TELEGRAM_SECRET\"\napi_base = \"{}\"\n\
             policy = \"debounce\"\npause_ms = 1000\nedit_interval_ms = 100\n",
            fake.base
        ),
    );
    let store = format!("file:{}", dir.path().join("data").display());
    let channels = ["--channels", file.to_str().unwrap()];
    let updates: Vec<PlatformRequest> = ["one", "two", "three"]
        .iter()
        .enumerate()
        .map(|(at, text)| request(&["telegram-update", &(40 + at).to_string(), "620", "5", text]))
        .collect();
    // Turns of 8 s in 8 chunks: streaming for a while after the pause.
    let mut first = Serve::start_with_env(&store, 8_000, 8, &channels, &SECRETS);
    let webhook = first.url("/channels/telegram/webhook");
    for update in &updates {
        let (status, _) = deliver(&webhook, update, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
        assert_eq!(status, 200);
    }
    // An edit comes only after the posted message's id is kept.
    eventually("the gathered turn's reply is posted and edited", || {
        !fake.done("editMessageText").is_empty()
    })
    .await;
    first.kill();
    assert_eq!(fake.done("sendMessage").len(), 1);

    let fourth = request(&["telegram-update", "43", "620", "5", "four"]);
    let second = Serve::start_with_env(&store, 200, 2, &channels, &SECRETS);
    let webhook = second.url("/channels/telegram/webhook");
    let (status, _) = deliver(&webhook, &fourth, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200);
    eventually("both replies are whole", || {
        let shown = fake.shown("620");
        shown.len() == 2 && shown[0].ends_with("to: three") && shown[1].ends_with("to: four")
    })
    .await;
    assert_eq!(fake.done("sendMessage").len(), 2, "{:?}", fake.calls());
    let page: serde_json::Value = reqwest::Client::new()
        .get(second.url("/v1/sessions/channel:telegram/telegram%7C620/events"))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let events = page["events"].as_array().unwrap();
    let inputs: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"]["type"] == "user_input")
        .map(|e| e["kind"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["one", "two", "three", "four"], "{page}");
    let outputs = events
        .iter()
        .filter(|e| e["kind"]["type"] == "agent_output")
        .count();
    assert_eq!(outputs, 2, "{page}");
}
