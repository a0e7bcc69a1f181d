//! The gathering policies of a channels file: with `policy = "debounce"` three messages sent
//! in quick succession get one reply, to the last, with the earlier two in the session's
//! history before it; with `policy = "burst"` one reply to all three as one message. With
//! `lock = "chat"` a chat's threads take turns (the second thread's turn starts after the
//! first's reply), where by default they run side by side.

#![cfg(feature = "http")]

mod support;

use support::channels::{
    channels_file, deliver, now_seconds, request, FakePlatform, PlatformRequest, SECRETS,
    SLACK_SECRET, TELEGRAM_SECRET,
};
use support::harness::eventually;
use support::serve::Serve;

const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

async fn events(serve: &Serve, user: &str, session: &str) -> Vec<serde_json::Value> {
    let page: serde_json::Value = reqwest::Client::new()
        .get(serve.url(&format!("/v1/sessions/{user}/{session}/events")))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["events"].as_array().unwrap().clone()
}

fn texts(events: &[serde_json::Value], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"]["type"] == kind)
        .map(|e| e["kind"]["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `count` replies are written (their turns stored before).
async fn replied(serve: &Serve, count: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let metrics = serve.metrics().await;
        let sent: u64 = metrics
            .lines()
            .filter(|l| {
                l.starts_with("turnstile_channel_replies_total") && l.contains("result=\"sent\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        if sent >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} replies were not written: {metrics}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn gathered(policy: &str, chat: &str) -> (FakePlatform, Serve, tempfile::TempDir) {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = channels_file(
        dir.path(),
        &format!(
            "[telegram]\nbot_token_env = \"TEST_TELEGRAM_TOKEN\"\n\
             secret_token_env = \"TEST_TELEGRAM_SECRET\"\napi_base = \"{}\"\n\
             policy = \"{policy}\"\npause_ms = 1500\n",
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
    // Built first (a Python process each), then sent back to back.
    let updates: Vec<PlatformRequest> = ["first", "second", "third"]
        .iter()
        .enumerate()
        .map(|(at, text)| request(&["telegram-update", &(900 + at).to_string(), chat, "42", text]))
        .collect();
    let webhook = serve.url("/channels/telegram/webhook");
    for update in &updates {
        let (status, _) = deliver(&webhook, update, &[(SECRET_HEADER, TELEGRAM_SECRET)]).await;
        assert_eq!(status, 200);
    }
    (fake, serve, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debounce_answers_the_last_message_once_the_chat_pauses() {
    let (fake, serve, _dir) = gathered("debounce", "610").await;
    replied(&serve, 1).await;
    let history = events(&serve, "channel:telegram", "telegram%7C610").await;
    assert_eq!(texts(&history, "user_input"), ["first", "second", "third"]);
    assert_eq!(texts(&history, "agent_output").len(), 1, "{history:?}");
    let shown = fake.shown("610");
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].ends_with("to: third"), "{shown:?}");
    assert_eq!(fake.done("sendMessage").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_answers_all_the_messages_as_one() {
    let (fake, serve, _dir) = gathered("burst", "611").await;
    replied(&serve, 1).await;
    let history = events(&serve, "channel:telegram", "telegram%7C611").await;
    assert_eq!(texts(&history, "user_input"), ["first\nsecond\nthird"]);
    let shown = fake.shown("611");
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].ends_with("to: first\nsecond\nthird"), "{shown:?}");
}

/// When the first turn of thread T2 started and when T1's turn ended, in ms, with `lock`.
async fn threads_with(lock: Option<&str>) -> (u64, u64) {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let lock = lock.map_or(String::new(), |l| format!("lock = \"{l}\"\n"));
    let file = channels_file(
        dir.path(),
        &format!(
            "[slack]\nbot_token_env = \"TEST_SLACK_TOKEN\"\n\
             signing_secret_env = \"TEST_SLACK_SECRET\"\napi_base = \"{}/api\"\n{lock}",
            fake.base
        ),
    );
    let store = format!("file:{}", dir.path().join("data").display());
    // Turns of 1.5 s.
    let serve = Serve::start_with_env(
        &store,
        1_500,
        2,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let now = now_seconds().to_string();
    let event = |ts: &str, thread: &str| {
        request(&[
            "slack-event",
            SLACK_SECRET,
            &now,
            "C1",
            "U1",
            ts,
            "hi",
            thread,
        ])
    };
    let (first, second) = (event("5.1", "T1"), event("5.2", "T2"));
    let url = serve.url("/channels/slack/events");
    assert_eq!(deliver(&url, &first, &[]).await.0, 200);
    assert_eq!(deliver(&url, &second, &[]).await.0, 200);
    eventually("both threads are answered", || {
        fake.shown("C1")
            .iter()
            .filter(|t| t.ends_with("to: hi"))
            .count()
            == 2
    })
    .await;
    let t1 = events(&serve, "channel:slack", "slack%7CC1%7CT1").await;
    let t2 = events(&serve, "channel:slack", "slack%7CC1%7CT2").await;
    // A turn's output is written when it ends, `duration_ms` after it started.
    let output = |events: &[serde_json::Value]| {
        let output = events
            .iter()
            .find(|e| e["kind"]["type"] == "agent_output")
            .expect("an output")
            .clone();
        let end = output["at_ms"].as_u64().unwrap();
        (end - output["kind"]["duration_ms"].as_u64().unwrap(), end)
    };
    (output(&t2).0, output(&t1).1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_lock_makes_its_threads_take_turns() {
    let (t2_started, t1_ended) = threads_with(Some("chat")).await;
    assert!(
        t2_started >= t1_ended,
        "under a chat lock T2 started at {t2_started}, before T1 ended at {t1_ended}"
    );
    let (t2_started, t1_ended) = threads_with(None).await;
    assert!(
        t2_started < t1_ended,
        "by default threads run side by side: T2 started at {t2_started}, T1 ended at {t1_ended}"
    );
}
