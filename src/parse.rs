//! [`ParseError`]: a word that names none of a setting's values.

/// A spelling that names none of the values a setting takes, such as an overlap policy of
/// `"sometimes"`: what was being read, what was given and what would have been accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}: expected {expected}")]
#[non_exhaustive]
pub struct ParseError {
    /// What was being read: `overlap policy`, `memory store`, ….
    pub what: &'static str,
    /// The spelling given.
    pub given: String,
    /// The spellings accepted, in words.
    pub expected: &'static str,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, given: &str, expected: &'static str) -> Self {
        Self {
            what,
            given: given.to_owned(),
            expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_says_what_was_given_and_what_is_accepted() {
        let error = ParseError::new("overlap policy", "sometimes", "queue or latest");
        assert_eq!(
            error.to_string(),
            "unknown overlap policy \"sometimes\": expected queue or latest"
        );
    }
}
