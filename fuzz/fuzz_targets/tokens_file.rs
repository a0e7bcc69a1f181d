//! Arbitrary text as the tokens file of `turnstile serve`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    turnstile::fuzzing::check_tokens_file(text);
});
