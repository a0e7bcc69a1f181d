//! Keeping secrets out of what the agent says: the API key and the extra headers' values (a
//! gateway's key often travels in one) never reach an error, a log line or a stored reason, even
//! when a server echoes them back whole or in part; and the endpoint is shown without its user
//! info or query (where some deployments put a key).

use reqwest::header::HeaderMap;

/// The longest piece of a server's text kept in a message: enough for its explanation, not a
/// page of HTML.
pub(super) const MAX_DETAIL_CHARS: usize = 300;

/// Characters in a row of a secret that are taken out wherever they appear. Servers echo part
/// of a key (`sk-proj-…abcd`): a fragment this long may narrow a key down, a shorter one (the
/// last four characters a dashboard shows) does not.
pub(super) const MIN_SECRET_FRAGMENT: usize = 8;

/// The shortest secret taken out when it appears whole: a secret shorter than
/// [`MIN_SECRET_FRAGMENT`] (a short password in the URL) is still redacted as a whole, but one
/// shorter than this (a header value such as `1` or `yes`) is not a secret anyone could use, and
/// taking it out would blank ordinary words.
pub(super) const MIN_WHOLE_SECRET: usize = 4;

/// How much of a text is read to produce [`MAX_DETAIL_CHARS`] of it: twice as much, since each
/// redaction shortens what is shown.
const READ_FACTOR: usize = 2;

/// What replaces a secret.
const REDACTED: &str = "[redacted]";

/// The secrets of one agent.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    /// Each secret's characters.
    values: Vec<Vec<char>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} kept out)", self.values.len())
    }
}

impl Secrets {
    /// The API key, the values of the extra headers, and the endpoint's password and query
    /// values (where some deployments put a key).
    pub(super) fn new(key: Option<&str>, headers: &HeaderMap, endpoint: &reqwest::Url) -> Self {
        let header_values = headers
            .values()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let from_url = endpoint
            .password()
            .map(str::to_owned)
            .into_iter()
            .chain(endpoint.query_pairs().map(|(_, value)| value.into_owned()));
        let values: Vec<String> = key
            .map(str::to_owned)
            .into_iter()
            .chain(header_values)
            .chain(from_url)
            .collect();
        Self::from_values(values.iter().map(String::as_str))
    }

    /// These values (an MCP server's header values, say).
    pub(crate) fn from_values<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let values = values
            .into_iter()
            .map(|value| value.trim().chars().collect::<Vec<char>>())
            .filter(|chars| chars.len() >= MIN_WHOLE_SECRET)
            .collect();
        Self { values }
    }

    /// JSON `text` (a request body kept for reading) with every whole secret replaced by
    /// `[redacted]`, as it is written and as a JSON string escapes it (a header value with a
    /// quote in it); otherwise as it is. Borrowed when it holds none.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let mut text = std::borrow::Cow::Borrowed(text);
        for value in &self.values {
            let secret: String = value.iter().collect();
            let quoted = serde_json::to_string(&secret).unwrap_or_default();
            let escaped = quoted
                .get(1..quoted.len().saturating_sub(1))
                .unwrap_or_default();
            for form in [secret.as_str(), escaped] {
                if !form.is_empty() && text.contains(form) {
                    text = std::borrow::Cow::Owned(text.replace(form, REDACTED));
                }
            }
        }
        text
    }

    /// `text` fit to show and log: every run of [`MIN_SECRET_FRAGMENT`] or more characters of a
    /// secret replaced by `[redacted]`, control characters (line breaks, escape sequences)
    /// turned into spaces so that it stays on one line, and at most [`MAX_DETAIL_CHARS`]
    /// characters.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.scrub_within(text, MAX_DETAIL_CHARS)
    }

    /// [`Secrets::scrub`], keeping up to `max_chars` characters.
    pub(super) fn scrub_within(&self, text: &str, max_chars: usize) -> String {
        let chars: Vec<char> = text
            .chars()
            .take(max_chars.saturating_mul(READ_FACTOR))
            .collect();
        let mut out = String::with_capacity(chars.len());
        let mut shown = 0;
        let mut at = 0;
        while at < chars.len() && shown < max_chars {
            let secret = self.secret_at(&chars[at..]);
            if secret > 0 {
                out.push_str(REDACTED);
                shown += REDACTED.len();
                at += secret;
                continue;
            }
            let c = chars[at];
            out.push(if c.is_control() { ' ' } else { c });
            shown += 1;
            at += 1;
        }
        out
    }

    /// How many characters at the start of `text` to redact: the longest run of at least
    /// [`MIN_SECRET_FRAGMENT`] characters of a secret, or a whole shorter secret; 0 for none.
    fn secret_at(&self, text: &[char]) -> usize {
        let mut longest = 0;
        for secret in &self.values {
            if secret.len() < MIN_SECRET_FRAGMENT {
                if text.starts_with(secret) {
                    longest = longest.max(secret.len());
                }
                continue;
            }
            for start in 0..secret.len() {
                let run = secret[start..]
                    .iter()
                    .zip(text)
                    .take_while(|(a, b)| a == b)
                    .count();
                if run >= MIN_SECRET_FRAGMENT {
                    longest = longest.max(run);
                }
            }
        }
        longest
    }
}

/// `url` as messages show it: without user info and query, where deployments sometimes put
/// credentials.
pub(super) fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    const KEY: &str = "sk-live-0123456789abcdef";

    fn endpoint() -> reqwest::Url {
        reqwest::Url::parse("http://127.0.0.1:9/v1/chat/completions").unwrap()
    }

    #[test]
    fn a_key_echoed_whole_or_in_part_is_taken_out() {
        let secrets = Secrets::new(Some(KEY), &HeaderMap::new(), &endpoint());
        assert_eq!(
            secrets.scrub(&format!("bad key {KEY}!")),
            "bad key [redacted]!"
        );
        // The first twelve characters and the last four, as some servers echo a key.
        let partial = format!("key {}****{}", &KEY[..12], &KEY[KEY.len() - 4..]);
        assert_eq!(secrets.scrub(&partial), "key [redacted]****cdef");
        assert_eq!(
            secrets.scrub("sk-live"),
            "sk-live",
            "shorter runs say nothing"
        );
    }

    #[test]
    fn a_kept_request_body_loses_its_secrets_and_nothing_else() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-gateway-key",
            HeaderValue::from_static("gw-secret-value-42"),
        );
        let secrets = Secrets::new(Some(KEY), &headers, &endpoint());
        let body = format!("{{\"content\":\"my key is {KEY}\\nand gw-secret-value-42\"}}");
        assert_eq!(
            secrets.redact(&body),
            "{\"content\":\"my key is [redacted]\\nand [redacted]\"}"
        );
        // A value with a quote in it appears escaped in JSON, and is taken out there too.
        let mut quoted = HeaderMap::new();
        quoted.insert("x-odd", HeaderValue::from_static("pa\"ss-word-99"));
        let secrets = Secrets::new(None, &quoted, &endpoint());
        let body = serde_json::json!({ "content": "said pa\"ss-word-99" }).to_string();
        assert_eq!(secrets.redact(&body), "{\"content\":\"said [redacted]\"}");
        let clean = "x".repeat(10_000);
        assert!(matches!(
            secrets.redact(&clean),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn header_values_are_secrets_and_text_stays_on_one_bounded_line() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-gateway-key",
            HeaderValue::from_static("gw-secret-value-42"),
        );
        headers.insert("x-team", HeaderValue::from_static("7"));
        let secrets = Secrets::new(None, &headers, &endpoint());
        assert_eq!(
            secrets.scrub("team 7 used gw-secret-value-42\nnext line\u{1b}[31m"),
            "team 7 used [redacted] next line [31m"
        );
        assert_eq!(secrets.scrub(&"y".repeat(1000)).len(), MAX_DETAIL_CHARS);
    }

    #[test]
    fn the_endpoints_password_and_query_values_are_secrets_even_short() {
        let url = reqwest::Url::parse("https://me:pw12@host/v1?api-key=s3cr3t-key").unwrap();
        let secrets = Secrets::new(None, &HeaderMap::new(), &url);
        assert_eq!(
            secrets.scrub("login pw12 with s3cr3t-key refused"),
            "login [redacted] with [redacted] refused"
        );
    }

    #[test]
    fn the_shown_url_has_no_credentials() {
        let url =
            reqwest::Url::parse("https://me:pw@host:8443/v1/chat/completions?api-key=s").unwrap();
        assert_eq!(shown_url(&url), "https://host:8443/v1/chat/completions");
    }
}
