//! A Slack app on `serve --channels`: requests signed as `slack_sdk` signs them are taken, a
//! forged or five-minute-old one is refused with 401; the URL check is answered; Slack's
//! retries of an event (`X-Slack-Retry-Num`) store it once; the reply goes to the message's
//! thread through `chat.postMessage` and `chat.update`; a flood of one thread is bounded and
//! its newest message gets the whole answer.

#![cfg(feature = "http")]

mod support;

use support::channels::{
    channels_file, deliver, now_seconds, request, FakePlatform, SECRETS, SLACK_SECRET,
};
use support::harness::eventually;
use support::serve::Serve;

fn start(fake: &FakePlatform, dir: &std::path::Path, latency_ms: u64) -> Serve {
    let file = channels_file(
        dir,
        &format!(
            "[slack]\nbot_token_env = \"TEST_SLACK_TOKEN\"\n\
             signing_secret_env = \"TEST_SLACK_SECRET\"\napi_base = \"{}/api\"\n\
             edit_interval_ms = 100\n",
            fake.base
        ),
    );
    let store = format!("file:{}", dir.join("data").display());
    Serve::start_with_env(
        &store,
        latency_ms,
        4,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    )
}

fn event(
    timestamp: u64,
    ts: &str,
    text: &str,
    thread: Option<&str>,
) -> support::channels::PlatformRequest {
    let timestamp = timestamp.to_string();
    let mut args = vec![
        "slack-event",
        SLACK_SECRET,
        &timestamp,
        "C9",
        "U1",
        ts,
        text,
    ];
    if let Some(thread) = thread {
        args.push(thread);
    }
    request(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_events_are_taken_once_and_answered_in_their_thread() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let serve = start(&fake, dir.path(), 0);
    let url = serve.url("/channels/slack/events");
    let now = now_seconds();

    let check = request(&[
        "slack-url-check",
        SLACK_SECRET,
        &now.to_string(),
        "ch4llenge",
    ]);
    let (status, body) = deliver(&url, &check, &[]).await;
    assert_eq!(
        (status, body),
        (200, serde_json::json!({"challenge": "ch4llenge"}))
    );

    let message = event(now, "100.1", "hello slack", Some("99.0"));
    assert_eq!(deliver(&url, &message, &[]).await.0, 200);
    // Slack's retries of the event.
    for retry in ["1", "2"] {
        let headers = [
            ("X-Slack-Retry-Num", retry),
            ("X-Slack-Retry-Reason", "http_timeout"),
        ];
        assert_eq!(deliver(&url, &message, &headers).await.0, 200);
    }
    eventually("the reply is written", || {
        fake.shown("C9")
            .first()
            .is_some_and(|t| t.ends_with("to: hello slack"))
    })
    .await;
    let posts = fake.done("chat.postMessage");
    assert_eq!(posts.len(), 1, "{:?}", fake.calls());
    assert_eq!(
        posts[0].body["thread_ts"], "99.0",
        "the reply stays in the thread"
    );

    // Forged: the body changed under a valid signature; old: signed six minutes ago.
    let mut forged = event(now, "100.2", "hello", None);
    forged.body = forged.body.replace("hello", "HELLO");
    let (status, body) = deliver(&url, &forged, &[]).await;
    assert_eq!(status, 401, "{body}");
    let old = event(now - 360, "100.3", "replayed", None);
    assert_eq!(deliver(&url, &old, &[]).await.0, 401);
    let metrics = serve.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("turnstile_channel_messages_total")
                && l.contains("channel=\"slack\"")
                && l.contains("result=\"duplicate\"")
                && l.ends_with(" 2")),
        "{metrics}"
    );
    assert!(!serve.logs().contains(SLACK_SECRET), "a secret was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_one_thread_is_bounded_and_the_newest_message_wins() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Each turn takes 4 s and says its first words after one: the flood arrives while the
    // first runs, before it said anything.
    let serve = start(&fake, dir.path(), 4_000);
    let url = serve.url("/channels/slack/events");
    let now = now_seconds();
    let flood = 20;
    // Built first (each by a Python process), then delivered back to back.
    let messages: Vec<_> = (0..flood)
        .map(|at| {
            event(
                now,
                &format!("200.{at:02}"),
                &format!("line {at}"),
                Some("150.0"),
            )
        })
        .collect();
    for message in &messages {
        assert_eq!(deliver(&url, message, &[]).await.0, 200);
    }
    let last = format!("to: line {}", flood - 1);
    eventually("the newest message is answered whole", || {
        fake.shown("C9").iter().any(|t| t.ends_with(&last))
    })
    .await;
    // Every reply settles as the whole answer to the newest message or as an answer cut short
    // by a newer message; a message superseded before its turn said anything gets none.
    eventually("every reply settles", || {
        fake.shown("C9")
            .iter()
            .all(|t| t.ends_with(&last) || t.ends_with("(interrupted)"))
    })
    .await;
    let shown = fake.shown("C9");
    assert!(
        shown.iter().all(|t| t != "(interrupted)"),
        "an empty reply was posted: {shown:?}"
    );
    assert_eq!(shown.iter().filter(|t| t.ends_with(&last)).count(), 1);
    assert!(
        shown.len() < flood / 2,
        "{} replies to {flood} messages: superseded ones were answered",
        shown.len()
    );
    // Every message is in the thread's session once.
    let events: serde_json::Value = reqwest::Client::new()
        .get(serve.url("/v1/sessions/channel:slack/slack%7CC9%7C150.0/events?limit=500"))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut inputs: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"]["type"] == "user_input")
        .map(|e| e["kind"]["text"].as_str().unwrap().to_owned())
        .collect();
    inputs.sort();
    let mut expected: Vec<String> = (0..flood).map(|at| format!("line {at}")).collect();
    expected.sort();
    assert_eq!(inputs, expected);
}
