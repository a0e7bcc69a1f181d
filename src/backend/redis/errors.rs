//! The Redis kit's errors and the one check of a key prefix every family kept in Redis makes.

use redis::RedisError;

use crate::store::StoreError;

/// Longest accepted key prefix, in bytes: every key of every family starts with it.
pub const MAX_PREFIX_BYTES: usize = 64;

/// Checks a key prefix: 1..=[`MAX_PREFIX_BYTES`] of ASCII letters, digits, `_`, `-`, `.` and
/// `:` only, so that it can never open a hash tag or a pattern. The error says what is accepted.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX_BYTES
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "redis key prefix {prefix:?} must be 1..={MAX_PREFIX_BYTES} of A-Z a-z 0-9 _ - . :"
        )),
    }
}

pub(crate) fn unavailable(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        backend: "redis",
        detail: detail.to_string(),
    }
}

/// Maps a Redis error: the server's or the network's trouble is `Unavailable`; a reply of the
/// wrong shape means a key holds data this store did not write, which is `Corrupt`.
pub fn redis_error(about: &str, e: RedisError) -> StoreError {
    let wrong_data = matches!(
        e.kind(),
        redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse
    ) || e.code() == Some("WRONGTYPE");
    if wrong_data {
        StoreError::Corrupt {
            key: about.to_owned(),
            detail: format!("redis: {e}"),
        }
    } else {
        unavailable(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_that_could_open_a_hash_tag_or_a_pattern_are_refused() {
        assert!(check_prefix("turnstile").is_ok());
        assert!(check_prefix("team-a:prod.v2").is_ok());
        for bad in [
            "",
            "a{b}",
            "a*",
            "a b",
            "é",
            &"x".repeat(MAX_PREFIX_BYTES + 1),
        ] {
            let err = check_prefix(bad).expect_err(bad);
            assert!(err.contains("A-Z a-z 0-9 _ - . :"), "{err}");
        }
    }
}
