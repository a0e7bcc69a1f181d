//! Property: `turnstile serve --channels FILE` checks the file before anything is served — a
//! file naming no platform, an unknown field, a secret's variable that is not set, a webhook
//! without a secret token, a Discord key that is not 32 bytes of hex, and a store several
//! processes share (which has no inbox yet) are each refused with a message naming what to fix.

#![cfg(feature = "http")]

mod support;

use support::cli::turnstile;

fn refused(store: &str, toml: &str, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("channels.toml");
    std::fs::write(&file, toml).unwrap();
    let args = [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        store,
        "--channels",
        file.to_str().unwrap(),
    ];
    let run = turnstile(&args);
    assert!(!run.success, "turnstile {args:?} should have failed");
    assert!(
        run.stderr.contains(expected),
        "expected {expected:?} in:\n{}",
        run.stderr
    );
    assert!(
        !run.stdout.contains("listening"),
        "it served: {}",
        run.stdout
    );
}

#[test]
fn bad_channels_files_are_refused_with_what_to_fix() {
    refused("memory", "# nothing\n", "names no platform");
    refused(
        "memory",
        "[telegram]\nbot_token_env = \"X\"\nbot_token = \"123:abc\"\n",
        "unknown field `bot_token`",
    );
    refused(
        "memory",
        "[slack]\nbot_token_env = \"TURNSTILE_TEST_UNSET_A\"\nsigning_secret_env = \"B\"\n",
        "bot_token_env names the environment variable TURNSTILE_TEST_UNSET_A, which is not set",
    );
    refused(
        "memory",
        "[telegram]\nbot_token_env = \"PATH\"\n",
        "a webhook needs secret_token_env",
    );
    refused(
        "memory",
        "[discord]\napplication_id = \"1\"\npublic_key = \"abcd\"\n",
        "32-byte key in hex",
    );
    refused(
        "memory",
        "[telegram]\nbot_token_env = \"PATH\"\nmode = \"polling\"\npause_ms = 500\n",
        "pause_ms goes with policy = \"debounce\" or \"burst\"",
    );
    refused(
        "memory",
        "[telegram]\nbot_token_env = \"PATH\"\nmode = \"polling\"\npolicy = \"sometimes\"\n",
        "unknown variant `sometimes`",
    );
}

#[cfg(feature = "redis")]
#[test]
fn a_store_several_processes_share_is_refused_until_its_inbox_is_built() {
    let redis = support::redis_server::RedisServer::start();
    refused(
        redis.url(),
        "[telegram]\nbot_token_env = \"PATH\"\nmode = \"polling\"\n",
        "answering each platform message in exactly one of them is not built yet",
    );
}
