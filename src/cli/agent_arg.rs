//! The `--agent` argument of `load` and `serve`: which built-in agent answers the turns.

use std::str::FromStr;

/// Which agent answers the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// `MockLlmAgent`: latency, streamed chunks, token usage.
    Mock,
    /// `EchoAgent`: the input back, at once.
    Echo,
}

impl FromStr for AgentKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mock" => Ok(Self::Mock),
            "echo" => Ok(Self::Echo),
            _ => Err(format!("unknown agent {s:?}; expected mock or echo")),
        }
    }
}

impl AgentKind {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mock => "mock",
            Self::Echo => "echo",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_round_trip_or_say_what_is_expected() {
        for kind in [AgentKind::Mock, AgentKind::Echo] {
            assert_eq!(kind.as_str().parse::<AgentKind>(), Ok(kind));
        }
        let err = "gpt".parse::<AgentKind>().unwrap_err();
        assert!(err.contains("expected mock or echo"), "{err}");
    }
}
