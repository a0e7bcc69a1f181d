//! A Discord application on `serve --channels`: interactions signed with PyNaCl (as Discord
//! signs them) are taken, a forged signature or an old timestamp is refused with 401; a PING
//! gets a PONG; a slash command gets a deferred response at once and its answer through the
//! interaction's webhook (the original response edited), the same interaction delivered twice
//! answered once; mentions in a reply notify no one. Under `debounce`, a command gathered into
//! a later one's turn has its deferred response resolved with a note, never left "thinking".

#![cfg(feature = "http")]

mod support;

use serde_json::json;
use support::channels::{
    channels_file, deliver, now_seconds, request, sdk, FakePlatform, DISCORD_APP, DISCORD_SEED,
    SECRETS,
};
use support::harness::eventually;
use support::serve::Serve;

fn signed(timestamp: u64, body: &serde_json::Value) -> support::channels::PlatformRequest {
    request(&[
        "discord-interaction",
        DISCORD_SEED,
        &timestamp.to_string(),
        &body.to_string(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_deferred_then_answered_through_the_webhook() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = sdk(&["discord-key", DISCORD_SEED]);
    let file = channels_file(
        dir.path(),
        &format!(
            "[discord]\napplication_id = \"{DISCORD_APP}\"\npublic_key = \"{}\"\n\
             api_base = \"{}\"\nedit_interval_ms = 100\n",
            key["public_key"].as_str().unwrap(),
            fake.base
        ),
    );
    let store = format!("file:{}", dir.path().join("data").display());
    let serve = Serve::start_with_env(
        &store,
        0,
        2,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let url = serve.url("/channels/discord/interactions");
    let now = now_seconds();

    let ping = json!({"id": "1", "application_id": DISCORD_APP, "type": 1, "version": 1});
    let (status, body) = deliver(&url, &signed(now, &ping), &[]).await;
    assert_eq!((status, body), (200, json!({"type": 1})));

    let command = json!({
        "id": "9001", "application_id": DISCORD_APP, "type": 2, "token": "itoken",
        "channel_id": "C5", "guild_id": "G1", "version": 1,
        "member": {"user": {"id": "U77", "username": "tester"}},
        "data": {"id": "cmd", "name": "ask", "type": 1,
                 "options": [{"name": "prompt", "type": 3, "value": "hi @everyone"}]}
    });
    let (status, body) = deliver(&url, &signed(now, &command), &[]).await;
    assert_eq!((status, body), (200, json!({"type": 5})));
    // Delivered again: acknowledged, answered once.
    let (status, _) = deliver(&url, &signed(now, &command), &[]).await;
    assert_eq!(status, 200);
    let webhook = format!("{DISCORD_APP}/itoken");
    eventually("the original response shows the answer", || {
        fake.shown(&webhook)
            .first()
            .is_some_and(|t| t.ends_with("to: hi @everyone"))
    })
    .await;
    assert!(
        fake.done("discord.followup").is_empty(),
        "{:?}",
        fake.calls()
    );
    let edits = fake.done("discord.edit");
    assert!(edits
        .iter()
        .all(|c| c.body["allowed_mentions"] == json!({"parse": []})));

    let events: serde_json::Value = reqwest::Client::new()
        .get(serve.url("/v1/sessions/channel:discord/discord%7CC5/events"))
        .bearer_auth(support::http::ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let inputs = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"]["type"] == "user_input")
        .count();
    assert_eq!(inputs, 1, "the second delivery ran again: {events}");

    let mut forged = signed(now, &ping);
    forged.body = forged.body.replace("\"1\"", "\"2\"");
    assert_eq!(deliver(&url, &forged, &[]).await.0, 401);
    assert_eq!(deliver(&url, &signed(now - 600, &ping), &[]).await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gathered_command_s_deferred_response_is_resolved_with_a_note() {
    let fake = FakePlatform::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = sdk(&["discord-key", DISCORD_SEED]);
    let file = channels_file(
        dir.path(),
        &format!(
            "[discord]\napplication_id = \"{DISCORD_APP}\"\npublic_key = \"{}\"\n\
             api_base = \"{}\"\npolicy = \"debounce\"\npause_ms = 1500\n",
            key["public_key"].as_str().unwrap(),
            fake.base
        ),
    );
    let serve = Serve::start_with_env(
        "memory",
        0,
        1,
        &["--channels", file.to_str().unwrap()],
        &SECRETS,
    );
    let url = serve.url("/channels/discord/interactions");
    let now = now_seconds();
    let command = |id: &str, token: &str, text: &str| {
        json!({
            "id": id, "application_id": DISCORD_APP, "type": 2, "token": token,
            "channel_id": "C6", "version": 1, "member": {"user": {"id": id}},
            "data": {"id": "cmd", "name": "ask", "type": 1,
                     "options": [{"name": "prompt", "type": 3, "value": text}]}
        })
    };
    let (early, late) = (
        signed(now, &command("1", "tok-early", "first")),
        signed(now, &command("2", "tok-late", "second")),
    );
    assert_eq!(deliver(&url, &early, &[]).await.1, json!({"type": 5}));
    assert_eq!(deliver(&url, &late, &[]).await.1, json!({"type": 5}));
    let (early, late) = (
        format!("{DISCORD_APP}/tok-early"),
        format!("{DISCORD_APP}/tok-late"),
    );
    eventually("both deferred responses are resolved", || {
        !fake.shown(&early).is_empty() && !fake.shown(&late).is_empty()
    })
    .await;
    assert_eq!(
        fake.shown(&early),
        ["(a newer message is answered instead)"]
    );
    assert!(
        fake.shown(&late)[0].ends_with("to: second"),
        "{:?}",
        fake.shown(&late)
    );
}
