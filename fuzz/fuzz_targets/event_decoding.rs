//! Arbitrary bytes as a stored event and as a stored session head: decoded or refused with a
//! typed error, and what decodes survives a round trip and a fold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    turnstile::fuzzing::check_event_json(data);
    turnstile::fuzzing::check_record_json(data);
});
