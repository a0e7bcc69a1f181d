//! What both baselines run per turn: the same agent as turnstile's run (`MockLlmAgent` or
//! `EchoAgent`, with the run's flags), given a `TurnContext` built with `TurnContext::builder`,
//! and a minimal session state that loads from and appends to the same `Store`.
//!
//! What the baselines leave out is the runtime's part: no state snapshot, no spawned turn task, no
//! deadline, no tool bookkeeping. As in the runtime, an interrupt wins over the agent at its next
//! await point, and the partial output is what the agent had emitted. The events written are those
//! a plain turn of turnstile writes: the input, then the output.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use turnstile::state::{
    Author, Event, EventKind, InputDisposition, InterruptReason, OutputStatus, Usage,
};
use turnstile::{Agent, EchoAgent, MockLlmAgent, SessionKey, Store, StoreError, TurnContext};

use super::super::options::{AgentKind, Latency};
use super::super::target::{Ack, AckKind, Failure};

/// The agent of the run, with its flags.
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

/// What one turn produced.
pub struct SimReply {
    text: String,
    interrupted: bool,
    usage: Option<Usage>,
}

/// Room for the first chunk only: the watcher stops listening after it, and later chunks are
/// dropped at once (as for a streaming caller that went away).
const FIRST_CHUNK_BUFFER: usize = 1;

impl AgentSim {
    /// The mock agent as `turnstile load` builds it for the runtime.
    fn mock(&self) -> MockLlmAgent {
        MockLlmAgent::new()
            .with_latency_range(self.latency.min, self.latency.max)
            .with_chunks(self.chunks)
            .with_seed(self.seed)
    }

    /// Runs one turn of the agent over `history`; stops at once when `cancel` fires. Signals
    /// `first_chunk` once the agent emits its first chunk, as the runtime's stream would deliver
    /// it.
    pub async fn run(
        &self,
        key: &SessionKey,
        input: &str,
        history: Arc<Vec<Event>>,
        cancel: &CancellationToken,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> SimReply {
        let mut builder = TurnContext::builder(key.clone())
            .input(input)
            .history(history)
            .cancellation(cancel.clone());
        let mut watcher = None;
        if let Some(signal) = first_chunk {
            let (sink, chunks) = mpsc::channel(FIRST_CHUNK_BUFFER);
            builder = builder.stream(sink);
            watcher = Some((chunks, signal));
        }
        let (turn, recording) = builder.build();
        let agent = async {
            match self.kind {
                AgentKind::Echo => EchoAgent.run(turn).await,
                AgentKind::Mock => self.mock().run(turn).await,
            }
        };
        let watch = async {
            if let Some((mut chunks, signal)) = watcher {
                if chunks.recv().await.is_some() {
                    let _ = signal.send(());
                }
            }
        };
        let finished = tokio::select! {
            // As in the runtime: an interrupt that arrived counts, even if the agent was done.
            biased;
            () = cancel.cancelled() => None,
            (reply, ()) = futures::future::join(agent, watch) => Some(reply),
        };
        match finished {
            Some(reply) => SimReply {
                text: reply.expect("the built-in agents never fail"),
                interrupted: false,
                usage: recording.usage(),
            },
            None => SimReply {
                text: recording.output(),
                interrupted: true,
                usage: recording.usage(),
            },
        }
    }
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
    /// At most `window_cap` newest events. Behind an `Arc` so that a turn gets it without a copy;
    /// the turn has dropped it by the time the next events are added.
    window: Arc<Vec<Event>>,
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
            window: Arc::new(loaded.events),
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
            .run(key, &input, self.window.clone(), cancel, first_chunk)
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
        let stored_short_of_replicas = match store.append(key, self.version, &events).await {
            Ok(version) => {
                self.version = version;
                false
            }
            // Committed on the primary: the session goes on from it, and the turn counts as a
            // store failure, as the runtime reports it.
            Err(StoreError::NotReplicated { version, .. }) => {
                self.version = version;
                true
            }
            Err(_) => return Err(Failure::Store),
        };
        self.next_seq += 2;
        let window = Arc::make_mut(&mut self.window);
        window.extend(events);
        let excess = window.len().saturating_sub(self.window_cap);
        window.drain(..excess);
        if stored_short_of_replicas {
            return Err(Failure::Store);
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
    use std::time::Duration;

    #[tokio::test]
    async fn a_simulated_turn_is_stored_like_a_turnstile_turn() {
        let store = turnstile::InMemoryStore::new();
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

    #[tokio::test]
    async fn an_interrupted_turn_keeps_what_the_agent_had_emitted() {
        let key = SessionKey::new("u", "s").unwrap();
        let sim = AgentSim {
            kind: AgentKind::Mock,
            latency: Latency {
                min: Duration::from_millis(40),
                max: Duration::from_millis(40),
            },
            chunks: 4,
            seed: 0,
        };
        let cancel = CancellationToken::new();
        let (signal, first) = oneshot::channel();
        let interrupter = async {
            first.await.unwrap();
            cancel.cancel();
        };
        let (reply, ()) = tokio::join!(
            sim.run(&key, "hi", Arc::default(), &cancel, Some(signal)),
            interrupter
        );
        let full = MockLlmAgent::reply_for("hi", 0);
        assert!(reply.interrupted);
        assert!(!reply.text.is_empty() && full.starts_with(&reply.text) && reply.text != full);
        assert_eq!(
            reply.usage, None,
            "usage is reported only by a finished turn"
        );
    }
}
