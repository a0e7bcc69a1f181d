//! The small value types of `turnstile load`'s flags, each parsed with a message that says what
//! was expected.

use std::str::FromStr;
use std::time::Duration;

/// `--agent`, shared with `serve`.
pub use crate::cli::agent_arg::AgentKind;

/// Agent latency: fixed, or a uniform range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    /// Shortest turn.
    pub min: Duration,
    /// Longest turn.
    pub max: Duration,
}

impl FromStr for Latency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let ms = |t: &str| {
            t.trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("bad latency {s:?}; expected milliseconds like 20 or 10..50"))
        };
        match s.split_once("..") {
            Some((a, b)) => {
                let (min, max) = (ms(a)?, ms(b)?);
                if min > max {
                    return Err(format!("bad latency {s:?}: the range is reversed"));
                }
                Ok(Self { min, max })
            }
            None => {
                let fixed = ms(s)?;
                Ok(Self {
                    min: fixed,
                    max: fixed,
                })
            }
        }
    }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min.as_millis())
        } else {
            write!(f, "{}..{}", self.min.as_millis(), self.max.as_millis())
        }
    }
}

/// A design to compare turnstile against, run on the same workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BaselineKind {
    /// One `Arc<tokio::sync::Mutex<State>>` per session: load → agent → append under the lock.
    MutexGate,
    /// One bare ractor actor per session, no registry, policies or bookkeeping.
    Ractor,
}

impl BaselineKind {
    /// The flag value, also the key under `baseline` in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MutexGate => "mutex-gate",
            Self::Ractor => "ractor",
        }
    }
}

impl FromStr for BaselineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mutex-gate" => Ok(Self::MutexGate),
            "ractor" => Ok(Self::Ractor),
            _ => Err(format!(
                "unknown baseline {s:?}; expected mutex-gate or ractor"
            )),
        }
    }
}

/// Whether to draw the progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Only when stdout is a terminal.
    Auto,
    /// Always (on stderr).
    Always,
    /// Never.
    Never,
}

impl FromStr for ProgressMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "always" => Ok(Self::Always),
            "never" => Ok(Self::Never),
            _ => Err(format!(
                "unknown progress mode {s:?}; expected auto, always or never"
            )),
        }
    }
}

/// A fraction in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction(pub f64);

impl FromStr for Fraction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(Self(v)),
            _ => Err(format!(
                "bad fraction {s:?}; expected a number from 0 to 1, like 0.1"
            )),
        }
    }
}

/// `--target URL[,URL…]`: the `turnstile serve` processes to load, exactly as given. Only
/// `http://` base URLs are accepted: no other scheme, no credentials in the URL (they would be
/// sent to wherever it points; `--token` says who is calling), no query or fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets(pub Vec<String>);

/// Most `--target` URLs: more than any one generator should spread over.
const MAX_TARGETS: usize = 64;

impl FromStr for Targets {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let urls = s
            .split(',')
            .map(|url| base_url(url.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if urls.len() > MAX_TARGETS {
            return Err(format!("at most {MAX_TARGETS} --target URLs"));
        }
        Ok(Self(urls))
    }
}

/// One `--target` URL, checked and without its trailing `/`.
fn base_url(url: &str) -> Result<String, String> {
    let expected = "expected a base URL like http://127.0.0.1:8080";
    let Some(rest) = url
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &url[7..])
    else {
        return Err(format!(
            "bad --target {url:?}: only http:// URLs are accepted; {expected}"
        ));
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(format!("bad --target {url:?}: no host; {expected}"));
    }
    if let Some(bad) = rest
        .chars()
        .find(|c| matches!(c, '@' | '?' | '#') || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "bad --target {url:?}: {bad:?} is not allowed (no credentials, query or fragment; \
             pass the token with --token); {expected}"
        ));
    }
    Ok(format!("http://{}", rest.trim_end_matches('/')))
}

/// `--spread`: how turns are spread over several `--target` URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Each turn to a URL picked at random, as a load balancer without affinity would: the
    /// processes must share the sessions (`serve --cluster` on one store).
    Random,
    /// Each session's turns always to the same URL, by a stable hash of its key: works with
    /// independent processes, each with its own store.
    Hash,
}

impl FromStr for Spread {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(Self::Random),
            "hash" => Ok(Self::Hash),
            _ => Err(format!("unknown spread {s:?}; expected random or hash")),
        }
    }
}

/// `--api`: which of the servers' routes the turns go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/sessions/{u}/{s}/turns`.
    Turnstile,
    /// `POST /v1/responses` in one conversation per session (OpenAI's API, `docs/openai-api.md`).
    Openai,
}

impl FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "turnstile" => Ok(Self::Turnstile),
            "openai" => Ok(Self::Openai),
            _ => Err(format!("unknown api {s:?}; expected turnstile or openai")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_takes_a_fixed_value_or_a_range() {
        assert_eq!(
            "20".parse::<Latency>().unwrap(),
            Latency {
                min: Duration::from_millis(20),
                max: Duration::from_millis(20)
            }
        );
        let range = "10..50".parse::<Latency>().unwrap();
        assert_eq!(
            (range.min, range.max),
            (Duration::from_millis(10), Duration::from_millis(50))
        );
        assert_eq!(range.to_string(), "10..50");
        assert!("50..10"
            .parse::<Latency>()
            .unwrap_err()
            .contains("reversed"));
        assert!("fast"
            .parse::<Latency>()
            .unwrap_err()
            .contains("milliseconds"));
    }

    #[test]
    fn fractions_and_baselines_parse_or_say_what_is_expected() {
        assert_eq!("0.25".parse::<Fraction>().unwrap(), Fraction(0.25));
        assert!("1.5".parse::<Fraction>().unwrap_err().contains("0 to 1"));
        assert!("-0.1".parse::<Fraction>().is_err());
        assert_eq!(
            "mutex-gate".parse::<BaselineKind>().unwrap(),
            BaselineKind::MutexGate
        );
        assert!("actix"
            .parse::<BaselineKind>()
            .unwrap_err()
            .contains("mutex-gate or ractor"));
    }

    #[test]
    fn targets_are_plain_http_base_urls() {
        let targets: Targets = "http://127.0.0.1:8080/, HTTP://localhost:9000/api"
            .parse()
            .unwrap();
        assert_eq!(
            targets.0,
            ["http://127.0.0.1:8080", "http://localhost:9000/api"]
        );
        for (bad, says) in [
            ("https://127.0.0.1:8080", "only http://"),
            ("127.0.0.1:8080", "only http://"),
            ("ftp://x", "only http://"),
            ("http://", "no host"),
            ("http://:80", "no host"),
            ("http://u:p@127.0.0.1", "credentials"),
            ("http://127.0.0.1/?a=b", "query"),
            ("http://127.0.0.1,", "only http://"),
        ] {
            let err = bad.parse::<Targets>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert_eq!("hash".parse::<Spread>().unwrap(), Spread::Hash);
        assert!("sticky"
            .parse::<Spread>()
            .unwrap_err()
            .contains("random or hash"));
    }
}
