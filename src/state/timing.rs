//! Where one turn's time went: recorded by the runtime on the event that ends the turn.

use serde::{Deserialize, Serialize};

/// Where one turn's time went, in whole milliseconds, as the runtime measured it. Written on the
/// event that ends a turn (`agent_output` or `turn_failed`); absent on events written before
/// turnstile recorded it and on events appended without a turn.
///
/// The record is kept in the store (the events and turns routes read it there); a live
/// session's context window, which agents and [`crate::Runtime::state`] see, leaves it out.
///
/// The phases follow each other: `queued_ms` (of which `load_ms`), then `permit_ms`, then
/// `recall_ms`, then `agent_ms`; the turn's `duration_ms` spans the last three. The write of the
/// turn's own events comes after the record is made, so it is not in it: the `store.append` span
/// and the `turnstile_store_write_seconds` histogram cover it.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnTiming {
    /// From the earliest of the turn's messages being taken in to the turn starting: waiting
    /// behind the session's earlier turns, and loading the session when a message woke it.
    #[serde(default)]
    pub queued_ms: u32,
    /// Of `queued_ms`, loading the session from the store, on the turn whose message woke it
    /// (with several processes, from the claim of the session's lease on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<u32>,
    /// Waiting for a runtime-wide turn permit (`max_concurrent_turns`).
    #[serde(default)]
    pub permit_ms: u32,
    /// Searching the user's memory before the agent ran (`auto_recall`).
    #[serde(default)]
    pub recall_ms: u32,
    /// The agent's run, its tool calls included. For the model agent this is the model's time
    /// plus the tools'.
    #[serde(default)]
    pub agent_ms: u32,
    /// From the agent's start to its first streamed chunk; absent when it streamed nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_chunk_ms: Option<u32>,
    /// When each of the turn's tool calls started, from the agent's start, in the order of the
    /// turn's `tool_call` events (their results carry their durations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_start_ms: Vec<u32>,
    /// Each request the agent made to its model, in the order made, retries included (the
    /// model agent records them; at most [`TurnTiming::MAX_MODEL_REQUESTS`], the later ones
    /// left out); empty for agents that make none or record none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_requests: Vec<ModelRequestTiming>,
}

/// One request an agent made to its model during a turn, placed from the agent's start (as
/// the other times of [`TurnTiming`]).
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelRequestTiming {
    /// The turn's request this is an attempt of: 1 for the first, one more for each tool round.
    pub round: u32,
    /// 1 for the first attempt, 2 for the first retry, and so on.
    pub attempt: u32,
    /// When it was sent.
    pub start_ms: u32,
    /// When the response's status and headers came; absent when none came (no connection, a
    /// timeout, or the turn ended first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u32>,
    /// When it ended: its body read to the end, or the attempt failed, or the turn ended.
    pub end_ms: u32,
    /// The HTTP status answered; absent when none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl TurnTiming {
    /// The most model requests one record keeps: a turn's tool rounds and retries are bounded
    /// by the agent's settings, and this bounds the record whatever they are.
    pub const MAX_MODEL_REQUESTS: usize = 64;

    /// `duration` in whole milliseconds, saturating at `u32::MAX` (49 days).
    pub(crate) fn ms(duration: std::time::Duration) -> u32 {
        u32::try_from(duration.as_millis()).unwrap_or(u32::MAX)
    }

    /// The agent's own time (for the model agent, the model's): `agent_ms` less the time in
    /// which at least one tool call ran. `tools` are the calls' `(start_ms, duration_ms)`;
    /// calls that overlap count once.
    pub fn own_agent_ms(&self, tools: &[(u32, u32)]) -> u32 {
        let mut spans: Vec<(u64, u64)> = tools
            .iter()
            .map(|&(start, length)| (u64::from(start), u64::from(start) + u64::from(length)))
            .collect();
        spans.sort_unstable();
        let mut covered = 0u64;
        let mut reach = 0u64;
        for (start, end) in spans {
            let start = start.max(reach);
            if end > start {
                covered += end - start;
                reach = end;
            }
        }
        u32::try_from(u64::from(self.agent_ms).saturating_sub(covered)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_own_time_counts_overlapping_tool_calls_once() {
        let timing = TurnTiming {
            agent_ms: 100,
            ..TurnTiming::default()
        };
        assert_eq!(timing.own_agent_ms(&[]), 100);
        assert_eq!(timing.own_agent_ms(&[(10, 20)]), 80);
        // Two calls side by side from 10 to 40, then one from 50 to 60.
        assert_eq!(timing.own_agent_ms(&[(50, 10), (10, 20), (20, 20)]), 60);
        // A call inside another adds nothing.
        assert_eq!(timing.own_agent_ms(&[(10, 50), (20, 5)]), 50);
        // Tools reported longer than the agent ran leave nothing, not a wrap-around.
        assert_eq!(timing.own_agent_ms(&[(0, 500)]), 0);
    }

    #[test]
    fn a_timing_record_has_a_stable_form_and_reads_with_fields_missing() {
        let timing = TurnTiming {
            queued_ms: 3,
            load_ms: Some(2),
            permit_ms: 0,
            recall_ms: 1,
            agent_ms: 40,
            first_chunk_ms: Some(12),
            tool_start_ms: vec![5],
            model_requests: vec![
                ModelRequestTiming {
                    round: 1,
                    attempt: 1,
                    start_ms: 1,
                    first_byte_ms: Some(3),
                    end_ms: 3,
                    status: Some(429),
                },
                ModelRequestTiming {
                    round: 1,
                    attempt: 2,
                    start_ms: 4,
                    first_byte_ms: None,
                    end_ms: 9,
                    status: None,
                },
            ],
        };
        let json = serde_json::to_value(&timing).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({"queued_ms": 3, "load_ms": 2, "permit_ms": 0, "recall_ms": 1,
                "agent_ms": 40, "first_chunk_ms": 12, "tool_start_ms": [5],
                "model_requests": [
                    {"round": 1, "attempt": 1, "start_ms": 1, "first_byte_ms": 3, "end_ms": 3,
                     "status": 429},
                    {"round": 1, "attempt": 2, "start_ms": 4, "end_ms": 9}]})
        );
        let sparse: TurnTiming =
            serde_json::from_value(serde_json::json!({"agent_ms": 7})).expect("reads");
        assert_eq!(sparse.agent_ms, 7);
        assert_eq!((sparse.load_ms, sparse.first_chunk_ms), (None, None));
    }
}
