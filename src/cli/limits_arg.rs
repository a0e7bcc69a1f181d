//! The turn bounds of `serve`, `chat` and `load`: the largest reply and the longest turn,
//! whatever the agent does.

use std::time::Duration;

use clap::Args;
use turnstile::RuntimeBuilder;

/// Bounds on every turn.
#[derive(Debug, Clone, Args)]
pub struct TurnLimitArgs {
    /// Largest reply, in bytes: a turn that streams or returns more is cut short there
    /// (interrupted, reason `reply_limit`, keeping the first BYTES bytes).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = turnstile::config::DEFAULT_MAX_REPLY_BYTES,
        value_parser = parse_bytes
    )]
    max_reply_bytes: usize,
    /// Seconds a turn may run before it is interrupted (reason `deadline`, keeping what it
    /// streamed), whatever its agent does. Default: no limit.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    turn_timeout: Option<Duration>,
}

impl TurnLimitArgs {
    /// `builder` with these bounds.
    pub fn apply(&self, builder: RuntimeBuilder) -> RuntimeBuilder {
        let builder = builder.with_max_reply_bytes(self.max_reply_bytes);
        match self.turn_timeout {
            Some(limit) => builder.with_turn_deadline(limit),
            None => builder,
        }
    }
}

/// A positive number of bytes.
fn parse_bytes(text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("bad size {text:?}; expected a number of bytes, at least 1"))
}

/// Seconds as a duration: positive, at most a day (what a turn or one model request could
/// reasonably be given).
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("bad duration {text:?}; expected seconds, above 0, at most 86400"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_positive() {
        assert_eq!(parse_bytes("10"), Ok(10));
        assert!(parse_bytes("0").is_err() && parse_bytes("-1").is_err());
    }

    #[test]
    fn seconds_are_positive_and_at_most_a_day() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["0", "-1", "86401", "soon"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
