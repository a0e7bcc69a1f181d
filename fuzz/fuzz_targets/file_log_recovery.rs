//! Arbitrary bytes as a session's head and log in the file store, recovered as a load does.
//!
//! The first byte picks the shape: raw files (head and log split at the first 0xFF byte, which
//! never occurs in UTF-8 JSON), or a valid session whose log or head the rest of the input
//! edits (so the fuzzer starts past the parser and reaches the marker and sequence checks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile::fuzzing::{check_log_recovery, valid_session, LogFiles};

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let window = usize::from(shape >> 4);
    let files = match shape & 0x03 {
        0 => match rest.iter().position(|&b| b == 0xFF) {
            Some(at) => LogFiles {
                head: Some(rest[..at].to_vec()),
                log: Some(rest[at + 1..].to_vec()),
            },
            None => LogFiles {
                head: None,
                log: Some(rest.to_vec()),
            },
        },
        edit => edited(edit, rest),
    };
    check_log_recovery(&files, window);
});

/// A valid session of three appends (head after the second), with `rest` as edits: pairs of
/// (position, byte) written over the log (shape 1) or the head (shape 2), or the log cut at
/// the first pair's position (shape 3).
fn edited(shape: u8, rest: &[u8]) -> LogFiles {
    let mut files = valid_session(3, 2, 2);
    let target = match shape {
        2 => files.head.as_mut(),
        _ => files.log.as_mut(),
    }
    .expect("the valid session has both files");
    for pair in rest.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([pair[0], pair[1]])) % (target.len() + 1);
        if shape == 3 {
            target.truncate(at);
            break;
        }
        match target.get_mut(at) {
            Some(byte) => *byte = pair[2],
            None => target.push(pair[2]),
        }
    }
    files
}
