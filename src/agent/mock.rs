//! A stand-in for an LLM: deterministic replies, configurable latency, streamed chunks.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use async_trait::async_trait;

use super::{Agent, AgentError, TurnContext};
use crate::state::Usage;

/// A mock LLM agent for tests, demos and load runs.
///
/// The reply is a pure function of the input and the history length, so runs are reproducible.
/// It takes `latency` in total (or a per-input value spread uniformly over a range), split evenly
/// between `chunks` streamed pieces, and stops at once when the turn is interrupted. It reports
/// token usage (one token per word).
#[derive(Debug, Clone)]
pub struct MockLlmAgent {
    latency: (Duration, Duration),
    chunks: usize,
    seed: u64,
}

impl Default for MockLlmAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl MockLlmAgent {
    /// No latency, four chunks.
    pub fn new() -> Self {
        Self {
            latency: (Duration::ZERO, Duration::ZERO),
            chunks: 4,
            seed: 0,
        }
    }

    /// Every turn takes exactly `latency`.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = (latency, latency);
        self
    }

    /// Each turn takes a duration drawn uniformly (but deterministically, from the input and the
    /// seed) from `min..=max`.
    pub fn with_latency_range(mut self, min: Duration, max: Duration) -> Self {
        self.latency = (min.min(max), max.max(min));
        self
    }

    /// Streams the reply in this many chunks (at least one).
    pub fn with_chunks(mut self, chunks: usize) -> Self {
        self.chunks = chunks.max(1);
        self
    }

    /// Changes the seed that spreads latencies.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The reply this agent gives to `input` after `history_len` earlier events.
    pub fn reply_for(input: &str, history_len: usize) -> String {
        format!("mock reply #{history_len} to: {input}")
    }

    fn latency_for(&self, input: &str) -> Duration {
        let (min, max) = self.latency;
        if min == max {
            return min;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.seed, input).hash(&mut hasher);
        let span = (max - min).as_nanos() as u64;
        min + Duration::from_nanos(hasher.finish() % (span + 1))
    }
}

/// Splits `text` into `n` pieces on character boundaries (fewer when the text is shorter).
fn split_chunks(text: &str, n: usize) -> Vec<&str> {
    let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let per = chars.len().div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for (idx, &at) in chars.iter().enumerate().skip(per).step_by(per) {
        let _ = idx;
        out.push(&text[start..at]);
        start = at;
    }
    out.push(&text[start..]);
    out
}

#[async_trait]
impl Agent for MockLlmAgent {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let input = turn.input();
        let reply = Self::reply_for(&input, turn.history().len());
        let pieces = split_chunks(&reply, self.chunks);
        let pause = self.latency_for(&input) / pieces.len() as u32;
        for piece in pieces {
            if !pause.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = turn.cancellation().cancelled() => break,
                }
            }
            turn.emit(piece).await;
        }
        turn.report_usage(Usage {
            input_tokens: input.split_whitespace().count() as u64,
            output_tokens: reply.split_whitespace().count() as u64,
        });
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_reassemble_to_the_reply() {
        for n in [1, 2, 3, 4, 7, 100] {
            let text = "mock reply #0 to: héllo wörld";
            let pieces = split_chunks(text, n);
            assert_eq!(pieces.concat(), text);
            assert!(pieces.len() <= n.max(1), "{n}: {pieces:?}");
        }
    }

    #[test]
    fn latency_ranges_are_deterministic_and_bounded() {
        let agent = MockLlmAgent::new()
            .with_latency_range(Duration::from_millis(10), Duration::from_millis(20));
        for input in ["a", "b", "c"] {
            let l = agent.latency_for(input);
            assert_eq!(l, agent.latency_for(input));
            assert!(l >= Duration::from_millis(10) && l <= Duration::from_millis(20));
        }
    }
}
