//! What both baselines run per turn: the mock agent's behaviour reproduced outside the runtime,
//! and a minimal session state that loads from and appends to the same `Store`.
//!
//! `TurnContext` can only be built inside the library, so a baseline cannot call
//! `MockLlmAgent::run`. This reproduces it with the same parameters: the same reply
//! (`MockLlmAgent::reply_for`), the same per-input latency, split over the same number of chunks,
//! each chunk appended to the partial output, stopping when the turn's token fires, and the same
//! token usage. What it leaves out is the runtime's part: no `TurnContext` (no state snapshot, no
//! stream sinks), no spawned turn task, no deadline, no tool bookkeeping. The events written are
//! those a plain turn of turnstile writes: the input, then the output.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstile::state::{
    Author, Event, EventKind, InputDisposition, InterruptReason, OutputStatus, Usage,
};
use turnstile::{MockLlmAgent, SessionKey, Store, StoreError};

use super::super::options::{AgentKind, Latency};
use super::super::target::{Ack, AckKind, Failure};

/// The agent's behaviour, with the flags of the run.
#[derive(Debug, Clone, Copy)]
pub struct AgentSim {
    /// `mock` or `echo`.
    pub kind: AgentKind,
    /// Total latency of a reply.
    pub latency: Latency,
    /// Chunks per reply (at least one).
    pub chunks: usize,
    /// Spreads latencies, as `MockLlmAgent::with_seed`.
    pub seed: u64,
}

/// What one simulated turn produced.
pub struct SimReply {
    text: String,
    interrupted: bool,
    usage: Option<Usage>,
}

impl AgentSim {
    /// The same choice as `MockLlmAgent`'s: a hash of (seed, input) spread over the range.
    fn latency_for(&self, input: &str) -> Duration {
        let Latency { min, max } = self.latency;
        if min == max {
            return min;
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.seed, input).hash(&mut hasher);
        let span = (max - min).as_nanos() as u64;
        min + Duration::from_nanos(hasher.finish() % (span + 1))
    }

    /// Runs one turn's agent logic; stops early when `cancel` fires. Signals `first_chunk` once
    /// the first piece is produced, as the runtime's stream would deliver it.
    pub async fn run(
        &self,
        input: &str,
        history_len: usize,
        cancel: &CancellationToken,
        mut first_chunk: Option<oneshot::Sender<()>>,
    ) -> SimReply {
        if self.kind == AgentKind::Echo {
            return SimReply {
                text: input.to_owned(),
                interrupted: false,
                usage: None,
            };
        }
        let reply = MockLlmAgent::reply_for(input, history_len);
        let pieces = split_chunks(&reply, self.chunks.max(1));
        let pause = self.latency_for(input) / pieces.len() as u32;
        let mut partial = String::with_capacity(reply.len());
        for piece in pieces {
            if !pause.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = cancel.cancelled() => {
                        return SimReply { text: partial, interrupted: true, usage: None };
                    }
                }
            }
            partial.push_str(piece);
            if let Some(signal) = first_chunk.take() {
                let _ = signal.send(());
            }
        }
        SimReply {
            usage: Some(Usage {
                input_tokens: input.split_whitespace().count() as u64,
                output_tokens: reply.split_whitespace().count() as u64,
            }),
            text: partial,
            interrupted: false,
        }
    }
}

/// Splits `text` into at most `n` pieces on character boundaries, like the mock agent does.
fn split_chunks(text: &str, n: usize) -> Vec<&str> {
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let per = starts.len().div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut from = 0;
    for &at in starts.iter().skip(per).step_by(per) {
        out.push(&text[from..at]);
        from = at;
    }
    out.push(&text[from..]);
    out
}

/// One turn to run: its input, its token and the first-chunk signal (see `Target::send`).
pub struct SimTurn<'a> {
    /// The message.
    pub input: String,
    /// Fired by `Target::interrupt`.
    pub cancel: &'a CancellationToken,
    /// Signalled when the first piece of the reply is produced.
    pub first_chunk: Option<oneshot::Sender<()>>,
}

/// A baseline session in memory: its store version, next sequence number and context window.
pub struct SessionState {
    version: u64,
    next_seq: u64,
    window: VecDeque<Event>,
    window_cap: usize,
}

impl SessionState {
    /// Loads the session (head and window) from the store.
    pub async fn load(
        store: &dyn Store,
        key: &SessionKey,
        window_cap: usize,
    ) -> Result<Self, StoreError> {
        let loaded = store.load(key, window_cap).await?;
        let (version, next_seq) = loaded.record.map_or((0, 1), |r| (r.version, r.next_seq));
        Ok(Self {
            version,
            next_seq,
            window: loaded.events.into(),
            window_cap,
        })
    }

    /// Runs one turn and appends its events; returns once the store acknowledged them.
    pub async fn run_turn(
        &mut self,
        store: &dyn Store,
        key: &SessionKey,
        sim: &AgentSim,
        turn: SimTurn<'_>,
    ) -> Result<Ack, Failure> {
        let SimTurn {
            input,
            cancel,
            first_chunk,
        } = turn;
        let started = Instant::now();
        let reply = sim
            .run(&input, self.window.len(), cancel, first_chunk)
            .await;
        let now = now_ms();
        let seq = self.next_seq;
        let status = if reply.interrupted {
            OutputStatus::Interrupted(InterruptReason::Requested)
        } else {
            OutputStatus::Final
        };
        let events = [
            Event::new(
                seq,
                Author::User,
                now,
                EventKind::UserInput {
                    text: input,
                    disposition: InputDisposition::Answered,
                },
            ),
            Event::new(
                seq + 1,
                Author::Agent,
                now,
                EventKind::AgentOutput {
                    text: reply.text,
                    status,
                    duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    usage: reply.usage,
                },
            ),
        ];
        self.version = store
            .append(key, self.version, &events)
            .await
            .map_err(|_| Failure::Store)?;
        self.next_seq += 2;
        self.window.extend(events);
        while self.window.len() > self.window_cap {
            self.window.pop_front();
        }
        Ok(Ack {
            seq: seq + 1,
            kind: if reply.interrupted {
                AckKind::Interrupted
            } else {
                AckKind::Completed
            },
        })
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
            assert!(pieces.len() <= n, "{n}: {pieces:?}");
        }
    }

    #[tokio::test]
    async fn a_simulated_turn_is_stored_like_a_turnstile_turn() {
        let store = turnstile::MemoryStore::new();
        let key = SessionKey::new("u", "s").unwrap();
        let sim = AgentSim {
            kind: AgentKind::Mock,
            latency: Latency {
                min: Duration::ZERO,
                max: Duration::ZERO,
            },
            chunks: 3,
            seed: 0,
        };
        let mut state = SessionState::load(&store, &key, 8).await.unwrap();
        let cancel = CancellationToken::new();
        for turn in 0..2 {
            let turn_input = SimTurn {
                input: format!("hi {turn}"),
                cancel: &cancel,
                first_chunk: None,
            };
            let ack = state
                .run_turn(&store, &key, &sim, turn_input)
                .await
                .unwrap();
            assert_eq!(ack.seq, 2 + 2 * turn);
        }
        let events = store.read_events(&key, 1, 10).await.unwrap();
        assert_eq!(events.len(), 4);
        assert_eq!(
            events[3].text(),
            Some(MockLlmAgent::reply_for("hi 1", 2).as_str())
        );
    }
}
