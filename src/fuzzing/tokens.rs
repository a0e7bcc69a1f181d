//! The tokens file of `turnstile serve`: arbitrary text gives tokens or an error naming a line
//! that exists; a control character anywhere (but the tab between words and line ends) is
//! refused; an accepted grant names a valid user.

use crate::channel::{validate_channel, CHANNEL_USER_PREFIX};
use crate::http::{Grant, Tokens, TokensError, MIN_TOKEN_BYTES};
use crate::key::{validate_id, KeyPart};

/// `text` as the contents of a tokens file.
pub fn check_tokens_file(text: &str) {
    match Tokens::parse(text) {
        Ok(tokens) => {
            assert!(
                !has_control(text),
                "a control character was accepted: {text:?}"
            );
            for (token, grant) in listed(text) {
                assert!(token.len() >= MIN_TOKEN_BYTES);
                assert_eq!(tokens.grant(token), Some(&grant));
            }
        }
        Err(TokensError::Line { line, reason }) => {
            assert!(
                line >= 1 && line <= text.lines().count(),
                "line {line}: {reason}"
            );
        }
        Err(other) => panic!("parsing text gave a read error: {other}"),
    }
}

/// Whether `text` holds a control character other than a tab or a line's end.
fn has_control(text: &str) -> bool {
    text.lines()
        .any(|line| line.chars().any(|c| c.is_control() && c != '\t'))
}

/// The `(token, grant)` of every line that lists one, read independently of the parser; only
/// called on text the parser accepted, so each line is well formed.
fn listed(text: &str) -> Vec<(&str, Grant)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(end) = words.iter().skip(1).position(|w| w.starts_with('#')) else {
            push_grant(&mut out, &words);
            continue;
        };
        push_grant(&mut out, &words[..end + 1]);
    }
    out
}

fn push_grant<'a>(out: &mut Vec<(&'a str, Grant)>, words: &[&'a str]) {
    let Some((&token, rest)) = words.split_first() else {
        return;
    };
    if token.starts_with('#') {
        return;
    }
    let grant = match rest {
        ["admin"] => Grant::Admin,
        [user, channels @ ..] => {
            let id = user.strip_prefix("user:").expect("an accepted grant");
            assert!(validate_id(id, KeyPart::User).is_ok() && !id.starts_with(CHANNEL_USER_PREFIX));
            let channels: Vec<String> = channels
                .first()
                .map(|list| {
                    let list = list.strip_prefix("channels:").expect("an accepted list");
                    list.split(',').map(str::to_owned).collect()
                })
                .unwrap_or_default();
            assert!(channels.iter().all(|c| validate_channel(c).is_ok()));
            Grant::User {
                id: id.to_owned(),
                channels,
            }
        }
        [] => panic!("a token without a grant was accepted"),
    };
    out.push((token, grant));
}
