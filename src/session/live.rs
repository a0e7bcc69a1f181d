//! A live session's state, and how the actor carries out the queue's decisions: starting turns,
//! recording finished ones, answering callers, stopping.
//!
//! Persistence (`persist`), compaction (`compaction`) and stopping (`stop`) are done to this
//! state in files of their own.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ractor::ActorRef;
use tokio::time::Instant;

use super::queue::{Admission, TurnQueue};
use super::task::{self, Slots, TurnEnd, TurnWrite};
use super::{
    SessionArgs, SessionDeps, SessionMsg, SessionShared, SessionView, StopKind, TurnControl,
    TurnFinished, TurnRequest,
};
use crate::agent::{TurnContext, TurnRecording};
use crate::call::{Outcome, OutcomeKind};
use crate::context::Window;
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{Author, Event, EventKind, ScopedState, Seq, SessionRecord};
use crate::stats::{Rejection, RuntimeEvent};
use crate::store::StoreError;

mod compaction;
mod memory;
mod persist;
mod replay;
mod state_keys;
mod stop;

pub(crate) use memory::ingest_stored;

/// Everything a live session holds. Owned by its actor; nothing else mutates it.
pub(crate) struct Live {
    key: SessionKey,
    deps: Arc<SessionDeps>,
    shared: Arc<SessionShared>,
    /// The head, folded over every event applied in memory. `record.version` is the last version
    /// the store acknowledged.
    record: SessionRecord,
    /// Session, user and app state as the agent sees it. Behind an `Arc` so that a turn gets a
    /// snapshot without copying; `Arc::make_mut` copies only if a turn still holds it.
    state: Arc<ScopedState>,
    /// The newest events, from which the agent's context window is drawn.
    window: Window,
    /// Events applied in memory that the store has not acknowledged (it failed); written with the
    /// next successful save.
    unsaved: Vec<Event>,
    /// Decides what becomes of arriving messages (overlap policies) and what runs next; it
    /// holds the waiting and superseded messages. Its `running` mirrors `running` here.
    queue: TurnQueue<TurnRequest>,
    running: Option<Running>,
    stopping: Option<StopKind>,
    /// A delete found this session holding something that was never stored — a running or
    /// waiting turn, unsaved events — so it deleted a session even if the store had none.
    deleted_live: bool,
    /// A write found this process no longer the session's owner: nothing more is run or
    /// written, and the registry has been asked to stop the session.
    lease_lost: bool,
    next_turn_id: u64,
    /// The summary's text, shared with turns without copying.
    summary: Option<Arc<str>>,
    /// A compaction task is running (at most one per session).
    compacting: bool,
    /// The last append failed in a way that leaves its outcome unknown (a timeout, a lost
    /// connection): the next write first reads back whether it committed.
    uncertain: Option<persist::Uncertain>,
    /// The newest event of an append the store acknowledged in full (replicas included, where
    /// it waits for them) while this session was live: a retry answered from events up to it
    /// needs no replica check.
    acknowledged_through: Seq,
    /// Messages in flight that carry a request id, and retries waiting for their answer;
    /// made on the first such message (most sessions never see one: no cost to them).
    requests: Option<Box<replay::InFlight>>,
    /// A turn that completed in place (see `task::start`), waiting to be recorded.
    immediate: Option<TurnFinished>,
}

/// The turn in flight.
struct Running {
    /// Tells this turn's `Finished` report from a stale one.
    id: u64,
    requests: Vec<TurnRequest>,
    inputs: Vec<String>,
    control: Arc<TurnControl>,
    record: TurnRecording,
    started: Instant,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Live {
    /// Loads the session from the store (activation), unless it was read with its lease.
    pub(crate) async fn load(args: SessionArgs) -> Result<Self, StoreError> {
        let SessionArgs {
            key,
            deps,
            shared,
            loaded,
        } = args;
        let loaded = match loaded {
            Some(loaded) => loaded,
            None => Self::read(&key, &deps).await?,
        };
        let record = loaded
            .record
            .unwrap_or_else(|| SessionRecord::new(key.clone(), now_ms()));
        let state = ScopedState {
            session: record.state.clone(),
            user: loaded.user_state,
            app: loaded.app_state,
        };
        shared.last_active.store(deps.stamp(), Ordering::Release);
        shared.gauges.publish(&record);
        let window = Window::new(loaded.events, deps.config.window);
        Ok(Self {
            key,
            deps,
            shared,
            record,
            state: Arc::new(state),
            window,
            unsaved: Vec::new(),
            queue: TurnQueue::default(),
            running: None,
            stopping: None,
            deleted_live: false,
            lease_lost: false,
            next_turn_id: 0,
            summary: None,
            compacting: false,
            uncertain: None,
            acknowledged_through: 0,
            requests: None,
            immediate: None,
        }
        .with_summary_cache())
    }

    /// Reads the session from the store within the activation timeout.
    async fn read(
        key: &SessionKey,
        deps: &SessionDeps,
    ) -> Result<crate::store::LoadedSession, StoreError> {
        let limit = deps.config.activation_timeout;
        tokio::time::timeout(limit, deps.store.load(key, deps.config.window))
            .await
            .map_err(|_| StoreError::Unavailable {
                backend: deps.store.name(),
                detail: format!(
                    "loading session {key} did not finish within {} ms (activation_timeout)",
                    limit.as_millis()
                ),
            })?
    }

    fn with_summary_cache(mut self) -> Self {
        self.refresh_summary();
        self
    }

    fn refresh_summary(&mut self) {
        self.summary = self
            .record
            .summary
            .as_ref()
            .map(|s| Arc::from(s.text.as_str()));
    }

    /// The last event folded into the summary or removed by `clear_context`: the agent sees
    /// only later events.
    fn covered_through(&self) -> Seq {
        let summarised = self.record.summary.as_ref().map_or(0, |s| s.through_seq);
        summarised.max(self.record.cleared_through)
    }

    /// Takes a caller's message and carries out what the queue decides for it: run it, let it
    /// wait (interrupting the running turn if its policy says so), or refuse it.
    pub(crate) fn admit(&mut self, request: TurnRequest, myself: &ActorRef<SessionMsg>) {
        if self.stopping.is_some() {
            // The registry stops routing before it sends `Stop`; this is a safety net only.
            self.answer(request, Err(Error::Draining));
            return;
        }
        if self.lease_lost {
            let refused = self.not_owner();
            self.answer(request, Err(refused));
            return;
        }
        let (policy, front) = (request.policy, request.front);
        match self.queue.admit(request, policy, front) {
            Admission::Start(request) => self.start(vec![request], myself),
            Admission::Wait { interrupt } => {
                if let (Some(reason), Some(running)) = (interrupt, &self.running) {
                    running.control.interrupt(reason);
                }
            }
            Admission::Reject(request) => {
                let key = self.key.clone();
                self.answer(request, Err(Error::Busy { key }));
            }
        }
    }

    /// Starts the next turn if the session is free; returns whether the actor should now stop.
    pub(crate) fn advance(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        if self.running.is_some() {
            return false;
        }
        let refuse = match &self.stopping {
            Some(StopKind::Shutdown) => Some(Error::Draining),
            Some(StopKind::LeaseLost) => Some(self.not_owner()),
            Some(StopKind::Delete(_)) => Some(Error::Deleted {
                key: self.key.clone(),
            }),
            _ => None,
        };
        if let Some(err) = refuse {
            for request in self.queue.take_waiting() {
                self.answer(request, Err(err.clone()));
            }
        }
        if let Some(batch) = self.queue.next_batch() {
            self.start(batch, myself);
            return false;
        }
        self.stopping.is_some()
    }

    fn start(&mut self, mut requests: Vec<TurnRequest>, myself: &ActorRef<SessionMsg>) {
        let last = requests.last().expect("a turn has at least one message");
        // A lone streaming caller that gave up takes its turn down with it.
        let token = match (&last.abandon, requests.len()) {
            (Some(abandon), 1) => abandon.child_token(),
            _ => tokio_util::sync::CancellationToken::new(),
        };
        let control = Arc::new(TurnControl::with_token(token));
        *self.shared.current.lock() = Some(control.clone());
        let inputs: Vec<String> = requests.iter().map(|r| r.input.clone()).collect();
        let deadline = last.deadline.or(self.deps.config.turn_deadline);
        let mut builder = TurnContext::builder(self.key.clone())
            .history(self.window.events().clone())
            .visible(self.window.visible(self.covered_through()))
            .state(self.state.clone())
            .attributes(last.attributes.clone())
            .cancellation(control.token.clone())
            .max_reply_bytes(self.deps.config.max_reply_bytes);
        if let Some(summary) = &self.record.summary {
            builder = builder.summary(summary.text.as_str());
        }
        if let Some(store) = &self.deps.artifacts {
            builder = builder.artifacts(store.clone());
        }
        if let Some(keys) = &self.deps.state_keys {
            builder = builder.state_keys(keys.clone());
        }
        if let Some(memory) = &self.deps.memory {
            builder = builder.memory(memory.store.clone(), memory.options.auto_recall);
            if let Some(user) = &last.memory_user {
                builder = builder.memory_user(user.clone());
            }
        }
        for request in &mut requests {
            builder = builder.input(request.input.clone());
            if let Some(stream) = request.stream.take() {
                builder = builder.stream(stream);
            }
        }
        let (ctx, record) = builder.build();
        let slots = self.deps.turn_permits.as_ref().map(|permits| Slots {
            permits: permits.clone(),
            wait: self.deps.config.concurrency_wait,
        });
        let id = self.next_turn_id;
        self.next_turn_id += 1;
        let span = tracing::info_span!("turn", key = %self.key, turn = id);
        let work = Box::pin(tracing::Instrument::instrument(
            task::execute(
                self.deps.agent.clone(),
                ctx,
                control.clone(),
                deadline,
                slots,
            ),
            span,
        ));
        self.running = Some(Running {
            id,
            requests,
            inputs,
            control,
            record,
            started: Instant::now(),
        });
        if let Some(result) = task::start(work, myself, id) {
            self.immediate = Some(TurnFinished {
                turn_id: id,
                result,
            });
        }
    }

    /// Whether a turn finished within its first poll and waits to be recorded.
    pub(crate) fn has_immediate(&self) -> bool {
        self.immediate.is_some()
    }

    /// A turn that finished within its first poll, to be recorded before the next message.
    pub(crate) fn take_immediate(&mut self) -> Option<TurnFinished> {
        self.immediate.take()
    }

    /// Records a finished turn, persists it, and answers its callers.
    pub(crate) async fn finish(&mut self, finished: TurnFinished) {
        let Some(running) = self.running.take_if(|r| r.id == finished.turn_id) else {
            return;
        };
        *self.shared.current.lock() = None;
        let superseded = self.queue.turn_ended();
        if let Some(StopKind::Delete(_)) = self.stopping {
            let key = self.key.clone();
            for request in running.requests.into_iter().chain(superseded) {
                self.answer(request, Err(Error::Deleted { key: key.clone() }));
            }
            return;
        }
        let record = running.record.take();
        let result = task::interrupt_wins(finished.result, &running.control);
        let result = self.check_state_keys(result, &record);
        let (end, failure) = task::settle(
            result,
            &record,
            &running.control,
            &self.key,
            &self.deps.config,
        );
        let superseded_inputs: Vec<String> = superseded.iter().map(|r| r.input.clone()).collect();
        let ran = !matches!(end, TurnEnd::Nothing);
        let write = TurnWrite {
            inputs: &running.inputs,
            record,
            end,
            duration_ms: u64::try_from(running.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            superseded: &superseded_inputs,
        };
        let mut events = task::turn_events(write, self.record.next_seq, now_ms());
        let answers = replay::answers_for(&running.requests, &events, failure);
        let first_superseded = events.len() - superseded.len();
        // Inputs carry their request ids: the turn's own first (when it left a trace), then the
        // superseded ones at the end.
        if ran {
            for (event, request) in events.iter_mut().zip(&running.requests) {
                event.request_id.clone_from(&request.request_id);
            }
        }
        for (event, request) in events[first_superseded..].iter_mut().zip(&superseded) {
            event.request_id.clone_from(&request.request_id);
        }
        let superseded_seqs: Vec<u64> = events[first_superseded..].iter().map(|e| e.seq).collect();
        self.apply(events);
        let saved = self.flush().await;
        for (request, answer) in running.requests.into_iter().zip(answers) {
            let answer = match (&saved, answer) {
                // A failure is recorded as the turn's outcome: unsaved, it is not acknowledged.
                (Err(err), Ok(_) | Err(Error::AgentFailed { .. })) => Err(err.clone()),
                (_, answer) => answer,
            };
            self.answer(request, answer);
        }
        for (request, seq) in superseded.into_iter().zip(superseded_seqs) {
            let answer = match &saved {
                Ok(()) => Ok(Outcome {
                    kind: OutcomeKind::Superseded,
                    output: String::new(),
                    seq,
                }),
                Err(err) => Err(err.clone()),
            };
            self.answer(request, answer);
        }
        if let Err(err) = saved {
            if self.unsaved.len() >= crate::config::MAX_UNSAVED_EVENTS {
                // The save just failed with a full backlog: what waits would run its agent only
                // to grow it. A busy session never reaches `retry_backlog`, so refuse here.
                for request in self.queue.take_waiting() {
                    self.answer(request, Err(err.clone()));
                }
            }
        }
    }

    fn answer(&mut self, mut request: TurnRequest, answer: Result<Outcome, Error>) {
        if let Some(id) = request.request_id.take() {
            for retry in self.answer_retries(&id) {
                self.send_answer(retry, answer.clone());
            }
        }
        self.send_answer(request, answer);
    }

    fn send_answer(&self, request: TurnRequest, answer: Result<Outcome, Error>) {
        let took = request.admitted.elapsed();
        metrics::histogram!("turnstile_turn_seconds").record(took.as_secs_f64());
        self.deps.counters.turn_answered(took);
        self.shared.gauges.publish(&self.record);
        if let Err(err) = &answer {
            metrics::counter!("turnstile_turn_errors_total", "code" => err.code()).increment(1);
            if matches!(err, Error::Busy { .. }) {
                self.deps
                    .counters
                    .record(RuntimeEvent::Rejected(Rejection::Busy));
            }
        }
        // The caller may have stopped waiting; the turn still counts as done.
        let _ = request.reply.send(answer);
        self.shared
            .last_active
            .store(self.deps.stamp(), Ordering::Release);
        self.shared.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// Appends a `ContextCleared` event: the agent's window starts after it; state is kept.
    pub(crate) async fn clear_context(&mut self) -> Result<(), Error> {
        let event = Event::new(
            self.record.next_seq,
            Author::System,
            now_ms(),
            EventKind::ContextCleared {},
        );
        self.apply(vec![event]);
        self.flush().await
    }

    /// The session as it is in memory.
    pub(crate) fn view(&self) -> SessionView {
        SessionView {
            record: self.record.clone(),
            events: self.window.events().to_vec(),
            user_state: self.state.user.clone(),
            app_state: self.state.app.clone(),
            live: true,
            unsaved: self.unsaved.len(),
        }
    }
}
