//! A Telegram bot without a public URL (`mode = "polling"`): updates fetched by `getUpdates`
//! are answered once each, the offset moves past an update only after it is stored (and past a
//! malformed one, which is skipped), and the webhook of a polling bot takes nothing.

#![cfg(feature = "http")]

mod support;

use support::channels::{channels_file, deliver, request, sdk, FakePlatform, SECRETS};
use support::harness::eventually;
use support::serve::Serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polled_updates_are_answered_once_and_confirmed_after_they_are_stored() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(
        dir.path(),
        &format!(
            "[telegram]\nbot_token_env = \"TEST_TELEGRAM_TOKEN\"\nmode = \"polling\"\n\
             poll_wait_s = 1\napi_base = \"{}\"\n",
            fake.base
        ),
    );
    let store = format!("file:{}", dir.path().join("data").display());
    let serve = Serve::start_with_env(
        &store,
        0,
        1,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let update = |id: &str, chat: &str, text: &str| {
        let made = sdk(&["telegram-update", id, chat, "7", text]);
        serde_json::from_str::<serde_json::Value>(made["body"].as_str().unwrap()).unwrap()
    };
    fake.push_update(update("10", "301", "one"));
    fake.push_update(serde_json::json!({"update_id": 11, "message": "not a message"}));
    fake.push_update(update("12", "302", "two"));
    eventually("both updates are answered", || {
        fake.shown("301")
            .first()
            .is_some_and(|t| t.ends_with("to: one"))
            && fake
                .shown("302")
                .first()
                .is_some_and(|t| t.ends_with("to: two"))
    })
    .await;
    eventually("the offset moves past every update", || {
        fake.offsets().contains(&13)
    })
    .await;
    // Polls after the confirmation get the updates no more: one reply each.
    let polls = fake.offsets().len();
    eventually("two more polls", || fake.offsets().len() >= polls + 2).await;
    assert_eq!(fake.done("sendMessage").len(), 2, "{:?}", fake.calls());
    let offsets = fake.offsets();
    assert!(
        offsets.windows(2).all(|pair| pair[0] <= pair[1]),
        "the offset never goes back: {offsets:?}"
    );
    // A polling bot's webhook refuses everything.
    let posted = request(&["telegram-update", "20", "303", "7", "by webhook"]);
    let (status, _) = deliver(
        &serve.url("/channels/telegram/webhook"),
        &posted,
        &[("X-Telegram-Bot-Api-Secret-Token", "anything")],
    )
    .await;
    assert_eq!(status, 401);
}

/// The example bot's file is a valid channels file: a polling Telegram bot.
#[test]
fn the_example_telegram_bot_config_reads() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/channels/telegram.toml"
    );
    let config = turnstile::channel::ChannelsConfig::load(std::path::Path::new(path)).unwrap();
    let telegram = config.telegram.expect("a [telegram] section");
    assert_eq!(telegram.mode, turnstile::channel::TelegramMode::Polling);
    assert_eq!(telegram.bot_token_env, "TELEGRAM_BOT_TOKEN");
    assert!(config.slack.is_none() && config.discord.is_none());
}
