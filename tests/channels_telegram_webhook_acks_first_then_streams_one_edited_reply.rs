//! A Telegram bot on `serve --channels`: an update (built with python-telegram-bot) is
//! acknowledged before its turn has run, its reply streams into one message by
//! `editMessageText` at a bounded rate and ends as the turn's stored output; Telegram's retry of
//! the update is acknowledged and answered no second time; a wrong secret token is refused with
//! 401 and counted; a 429 and a 500 from the Bot API are waited out and lose nothing.

#![cfg(feature = "http")]

mod support;

use std::time::{Duration, Instant};

use support::channels::{
    channels_file, deliver, request, FakePlatform, Fault, SECRETS, TELEGRAM_SECRET, TELEGRAM_TOKEN,
};
use support::harness::eventually;
use support::serve::Serve;

const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

fn config(api: &str) -> String {
    format!(
        "[telegram]\nbot_token_env = \"TEST_TELEGRAM_TOKEN\"\n\
         secret_token_env = \"TEST_TELEGRAM_SECRET\"\napi_base = \"{api}\"\n\
         edit_interval_ms = 200\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_is_acknowledged_first_and_answered_once_in_one_edited_message() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(dir.path(), &config(&fake.base));
    let store = format!("file:{}", dir.path().join("data").display());
    // A turn of 6 s in 6 chunks (the first after a second): the acknowledgement cannot wait
    // for it.
    let serve = Serve::start_with_env(
        &store,
        6_000,
        6,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let webhook = serve.url("/channels/telegram/webhook");
    let update = request(&["telegram-update", "700", "555", "42", "what is the time"]);

    let sent = Instant::now();
    let (status, _) = deliver(&webhook, &update, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    let acked = sent.elapsed();
    assert_eq!(status, 200);
    assert!(
        acked < Duration::from_secs(2),
        "the acknowledgement took {acked:?}: it waited for the turn"
    );
    assert!(
        fake.done("sendMessage").is_empty(),
        "a reply was sent before the acknowledgement"
    );

    // Telegram retries an update it got no answer to: the same update again.
    let (status, _) = deliver(&webhook, &update, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200, "a retry is acknowledged");

    eventually("the reply is final", || {
        fake.shown("555")
            .first()
            .is_some_and(|text| text.ends_with("to: what is the time"))
    })
    .await;
    // One message, edited as the reply grew; no second reply for the retry.
    assert_eq!(fake.done("sendMessage").len(), 1, "{:?}", fake.calls());
    let texts = fake.messages().into_values().next().unwrap();
    assert!(texts.len() >= 2, "the reply streamed by edits: {texts:?}");
    for pair in texts.windows(2) {
        assert!(
            pair[1].starts_with(pair[0].trim_end_matches('…')),
            "each edit extends the last: {texts:?}"
        );
    }
    let first = &fake.done("sendMessage")[0].body;
    assert_eq!(first["chat_id"], 555);
    assert_eq!(first["reply_parameters"]["message_id"], 7000);
    // The stored turn is what the chat shows: the session key is channel|chat.
    let events: serde_json::Value = reqwest::Client::new()
        .get(serve.url("/v1/sessions/channel:telegram/telegram%7C555/events"))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let outputs: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"]["type"] == "agent_output")
        .filter_map(|e| e["kind"]["text"].as_str())
        .collect();
    assert_eq!(outputs, vec![fake.shown("555")[0].as_str()], "{events}");
    let inputs = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"]["type"] == "user_input")
        .count();
    assert_eq!(inputs, 1, "the retry was not stored again: {events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_and_platform_faults_are_waited_out() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(dir.path(), &config(&fake.base));
    let serve = Serve::start_with_env(
        "memory",
        0,
        1,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let webhook = serve.url("/channels/telegram/webhook");
    let forged = request(&["telegram-update", "1", "9", "9", "let me in"]);
    let (status, body) = deliver(&webhook, &forged, &[(SECRET_HEADER, "guess")]).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "bad_signature");
    let (status, _) = deliver(&webhook, &forged, &[]).await;
    assert_eq!(status, 401);
    let metrics = serve.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("turnstile_channel_messages_total")
                && l.contains("result=\"unauthenticated\"")
                && l.ends_with(" 2")),
        "{metrics}"
    );
    let logs = serve.logs();
    assert!(
        !logs.contains(TELEGRAM_SECRET) && !logs.contains(TELEGRAM_TOKEN),
        "a secret was logged: {logs}"
    );

    // The Bot API refuses the first send twice: 429 (retry after 1 s), then 500.
    fake.fail(
        "sendMessage",
        1,
        Fault {
            status: 429,
            retry_after: Some(1),
        },
    );
    fake.fail(
        "sendMessage",
        1,
        Fault {
            status: 500,
            retry_after: None,
        },
    );
    let update = request(&["telegram-update", "2", "77", "9", "hello"]);
    let (status, _) = deliver(&webhook, &update, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
    assert_eq!(status, 200);
    eventually("the reply arrives after the faults", || {
        fake.shown("77")
            .first()
            .is_some_and(|t| t.ends_with("to: hello"))
    })
    .await;
    assert_eq!(fake.done("sendMessage").len(), 1, "{:?}", fake.calls());
    let refused = fake
        .calls()
        .iter()
        .filter(|c| c.method == "sendMessage" && c.status != 200)
        .count();
    assert_eq!(refused, 2);
}
