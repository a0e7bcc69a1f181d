//! Property: any strings read as a canonical session key, as a key's two ids or as a channel
//! message's (channel, chat, thread) give a valid key or a typed error, never a panic; a valid
//! key round-trips through its canonical string and JSON, and the file store's folders for it
//! stay inside the root with names that decode back to the ids. The property-test half of the
//! `keys` fuzz target (see `docs/fuzzing.md`).

use proptest::prelude::*;
use turnstile::fuzzing::{check_canonical_key, check_channel_key, check_key_parts};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

/// Ids full of what keys and paths treat specially, sometimes past the length limit.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,8}",
        r"[./\\%|:~#A-Z\x00\n ä😀-]{0,12}",
        "(%2F|%25|%7C|%2f|%|/|\\.\\.){0,6}",
        "[a-z%]{250,300}",
        "(?s).{0,40}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn canonical_strings_parse_to_keys_that_round_trip(user in id(), session in id()) {
        check_canonical_key(&format!("{user}/{session}"));
        check_canonical_key(&format!("{user}{session}"));
    }

    #[test]
    fn key_parts_make_valid_keys_or_are_refused(user in id(), session in id()) {
        check_key_parts(&user, &session);
        check_key_parts("", &session);
    }

    #[test]
    fn channel_messages_make_keys_or_are_refused(
        channel in prop_oneof!["[a-z._-]{1,10}", id()], chat in id(), thread in prop::option::of(id()),
    ) {
        check_channel_key(&channel, &chat, thread.as_deref());
    }
}
