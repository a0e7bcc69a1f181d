//! Arbitrary strings as session keys, key parts and channel keys.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    turnstile::fuzzing::check_canonical_key(text);
    // A NUL splits the input into the parts of a key: control characters are refused anyway,
    // so no valid input is lost.
    let mut parts = text.split('\0');
    let first = parts.next().unwrap_or_default();
    let second = parts.next().unwrap_or_default();
    turnstile::fuzzing::check_key_parts(first, second);
    turnstile::fuzzing::check_channel_key(first, second, parts.next());
});
