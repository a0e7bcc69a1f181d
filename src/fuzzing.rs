//! Checks shared by the fuzz targets in `fuzz/` and the property tests in `tests/fuzz_*.rs`
//! (feature `testing`; hidden from the docs, not a stable API). Each `check_*` function takes
//! one arbitrary input and panics when a property breaks, so a fuzzer reports the input and a
//! property test shrinks it; an input the code refuses with a typed error passes.
//!
//! This module exists because two of the properties need internals: the file store's folder
//! names and its synchronous session recovery (`store::file::probe`). Everything else goes
//! through the public API. See `docs/fuzzing.md`.

mod decoding;
mod file_log;
mod keys;
#[cfg(feature = "http")]
mod tokens;

pub use decoding::{check_event_json, check_record_json};
pub use file_log::{check_log_recovery, valid_session, LogFiles};
pub use keys::{check_canonical_key, check_channel_key, check_key_parts};
#[cfg(feature = "http")]
pub use tokens::check_tokens_file;
