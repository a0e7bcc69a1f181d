//! A live session's state, and how the actor carries out the queue's decisions: starting turns,
//! recording finished ones, answering callers, stopping.
//!
//! What is durable — the head, state and window as the store acknowledged them, and the writes
//! that extend them — is the session's [`Journal`]; compaction (`compaction`) and stopping
//! (`stop`) are done to this state in files of their own.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ractor::ActorRef;
use tokio::time::Instant;
use tracing::Instrument;

use super::journal::Journal;
use super::queue::{Admission, TurnQueue};
use super::task::{self, TurnPermits};
use super::{
    now_ms, Append, SessionArgs, SessionDeps, SessionMsg, SessionShared, SessionView, StopKind,
    TurnControl, TurnFinished, TurnRequest,
};
use crate::agent::{TurnContext, TurnRecording};
use crate::call::Outcome;
use crate::error::Error;
use crate::key::SessionKey;
use crate::stats::{Rejection, RuntimeEvent};
use crate::store::StoreError;

mod append;
mod compaction;
mod memory;
mod outcome;
mod replay;
mod state_keys;
mod stop;
mod timing;

pub(crate) use memory::ingest_stored;

/// Everything a live session holds. Owned by its actor; nothing else mutates it.
pub(crate) struct Live {
    key: SessionKey,
    deps: Arc<SessionDeps>,
    shared: Arc<SessionShared>,
    /// What the store acknowledged of the session, and the writes that extend it.
    journal: Journal,
    /// Decides what becomes of arriving messages (overlap policies) and what runs next; it
    /// holds the waiting and superseded messages. Its `running` mirrors `running` here.
    queue: TurnQueue<TurnRequest>,
    /// Boxed: every idle session would otherwise carry a turn's worth of bookkeeping.
    running: Option<Box<Running>>,
    stopping: Option<StopKind>,
    /// A delete found this session holding something that was never stored — a running or
    /// waiting turn, a write whose outcome is unknown — so it deleted a session even if the store had none.
    deleted_live: bool,
    next_turn_id: u64,
    /// A compaction task is running (at most one per session).
    compacting: bool,
    /// Messages in flight that carry a request id, and retries waiting for their answer;
    /// made on the first such message (most sessions never see one: no cost to them).
    requests: Option<Box<replay::InFlight>>,
    /// A turn that completed in place (see `task::start`), waiting to be recorded.
    immediate: Option<TurnFinished>,
    /// How long loading the session took, until its first turn counts it.
    activation: Option<timing::Activation>,
    /// Appends that wait for the running turn to be written (`Append::between_turns`), in the
    /// order they came.
    deferred: Vec<Append>,
}

/// The context a turn's agent sees: the window, then the entries its messages brought (numbered
/// on from the log's next seq; the write numbers them again with the turn), and how many of
/// them it sees. The window is shared as it is when no message brought any.
fn brought(
    window: &Arc<Vec<crate::state::Event>>,
    visible: usize,
    requests: &[TurnRequest],
    next_seq: crate::state::Seq,
) -> (Arc<Vec<crate::state::Event>>, usize) {
    let count: usize = requests.iter().map(|r| r.preceding.len()).sum();
    if count == 0 {
        return (window.clone(), visible);
    }
    let mut history = Vec::with_capacity(window.len() + count);
    history.extend(window.iter().cloned());
    let entries = requests.iter().flat_map(|r| r.preceding.iter().cloned());
    for (entry, seq) in entries.zip(next_seq..) {
        let (author, kind) = entry.into_event();
        history.push(crate::state::Event::new(seq, author, now_ms(), kind));
    }
    (Arc::new(history), visible + count)
}

/// The turn in flight.
struct Running {
    /// Tells this turn's `Finished` report from a stale one.
    id: u64,
    requests: Vec<TurnRequest>,
    control: Arc<TurnControl>,
    record: TurnRecording,
    /// When its messages were taken in and the turn started, for its timing record.
    before: timing::Before,
    /// The turn's span: the write of its events is traced within it.
    span: tracing::Span,
}

impl Live {
    /// Loads the session from the store (activation), unless it was read with its lease.
    pub(crate) async fn load(args: SessionArgs) -> Result<Self, StoreError> {
        let SessionArgs {
            key,
            deps,
            shared,
            loaded,
            claimed,
        } = args;
        // Loading counts from the lease's claim, where there is one: the session is not
        // servable before it is held.
        let (loaded, activation) = match (loaded, claimed) {
            (Some(loaded), Some((began, took))) => {
                (loaded, Some(timing::Activation { began, took }))
            }
            (Some(loaded), None) => (loaded, None),
            (None, claimed) => {
                let began = claimed.map_or_else(Instant::now, |(sent, _)| sent);
                let loaded = Self::read(&key, &deps)
                    .instrument(tracing::debug_span!("session.load", key = %key))
                    .await?;
                let took = began.elapsed();
                (loaded, Some(timing::Activation { began, took }))
            }
        };
        shared.last_active.store(deps.stamp(), Ordering::Release);
        let journal = Journal::open(
            key.clone(),
            loaded,
            deps.store.clone(),
            deps.keeper.clone(),
            shared.clone(),
            deps.config.window,
        );
        Ok(Self {
            key,
            deps,
            shared,
            journal,
            queue: TurnQueue::default(),
            running: None,
            stopping: None,
            deleted_live: false,
            next_turn_id: 0,
            compacting: false,
            requests: None,
            immediate: None,
            activation,
            deferred: Vec::new(),
        })
    }

    /// Reads the session from the store within the activation timeout.
    async fn read(
        key: &SessionKey,
        deps: &SessionDeps,
    ) -> Result<crate::store::LoadedSession, StoreError> {
        let limit = deps.config.activation_timeout;
        let loaded = tokio::time::timeout(limit, deps.store.load(key, deps.config.window))
            .await
            .map_err(|_| StoreError::Unavailable {
                backend: deps.store.name(),
                detail: format!(
                    "loading session {key} did not finish within {} ms (activation_timeout)",
                    limit.as_millis()
                ),
            })
            .and_then(|loaded| loaded);
        if loaded.as_ref().is_err_and(StoreError::is_environmental) {
            crate::stats::store_error(deps.store.name(), "load");
        }
        loaded
    }

    /// Whether a turn may start now without first looking at the store again (see
    /// [`Journal::settle`]).
    pub(crate) fn is_settled(&self) -> bool {
        self.journal.is_settled()
    }

    /// Before a turn starts on a journal that is not settled: settles it, and if that fails,
    /// answers the messages waiting with the store's error without running their agent (their
    /// turns would build on a view the store may not hold).
    pub(crate) async fn settle_before_turns(&mut self) {
        if self.running.is_some() || !self.queue.has_waiting() {
            return;
        }
        if let Err(error) = self.journal.settle().await {
            for request in self.queue.take_waiting() {
                self.answer(request, Err(error.clone()));
            }
        }
    }

    /// Settles the journal before `request` is looked at; answers it with the store's error
    /// when that fails. Returns the request when it may go on.
    pub(crate) async fn settle_for(&mut self, request: TurnRequest) -> Option<TurnRequest> {
        match self.journal.settle().await {
            Ok(()) => Some(request),
            Err(error) => {
                // Not `answer`: this message was never taken in, and its request id (should a
                // message with that id be in flight) is that one's to answer.
                self.send_answer(request, Err(error));
                None
            }
        }
    }

    /// Takes a caller's message and carries out what the queue decides for it: run it, let it
    /// wait (interrupting the running turn if its policy says so), or refuse it.
    pub(crate) fn admit(&mut self, request: TurnRequest, myself: &ActorRef<SessionMsg>) {
        if self.stopping.is_some() {
            // The registry stops routing before it sends `Stop`; this is a safety net only.
            self.answer(request, Err(Error::Draining));
            return;
        }
        if !self.journal.may_write() {
            let refused = self.journal.not_owner();
            self.answer(request, Err(refused));
            return;
        }
        // A message for a session that must exist, to one whose log is empty (nothing stored,
        // nothing written yet): refused, and nothing of it runs or is stored.
        if request.existing_only && self.journal.next_seq() <= 1 && self.running.is_none() {
            let key = self.key.clone();
            self.answer(request, Err(Error::NotFound { key }));
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
            Some(StopKind::LeaseLost) => Some(self.journal.not_owner()),
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
        let deadline = last.deadline.or(self.deps.config.turn_deadline);
        let window = self.journal.window();
        let (history, visible) = brought(
            window.events(),
            window.visible(self.journal.covered_through()),
            &requests,
            self.journal.next_seq(),
        );
        let mut builder = TurnContext::builder(self.key.clone())
            .history(history)
            .visible(visible)
            .state(self.journal.state().clone())
            .attributes(last.attributes.clone())
            .cancellation(control.token.clone())
            .max_reply_bytes(self.deps.config.max_reply_bytes);
        if let Some(summary) = &self.journal.record().summary {
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
        let permits = self
            .deps
            .turn_permits
            .as_ref()
            .map(|semaphore| TurnPermits {
                semaphore: semaphore.clone(),
                wait: self.deps.config.concurrency_wait,
            });
        let id = self.next_turn_id;
        self.next_turn_id += 1;
        let admitted = requests
            .iter()
            .map(|r| r.admitted)
            .min()
            .unwrap_or_else(Instant::now);
        let before = timing::Before::new(admitted, self.activation.take());
        let span = tracing::info_span!(
            "turn",
            key = %self.key,
            turn = id,
            queued_ms = crate::agent::millis(before.started.saturating_duration_since(admitted))
        );
        let work = Box::pin(
            task::execute(
                self.deps.agent.clone(),
                ctx,
                control.clone(),
                deadline,
                permits,
            )
            .instrument(span.clone()),
        );
        self.running = Some(Box::new(Running {
            id,
            requests,
            control,
            record,
            before,
            span,
        }));
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
        let running = *running;
        *self.shared.current.lock() = None;
        let superseded = self.queue.turn_ended();
        if let Some(StopKind::Delete(_)) = self.stopping {
            let key = self.key.clone();
            for request in running.requests.into_iter().chain(superseded) {
                self.answer(request, Err(Error::Deleted { key: key.clone() }));
            }
            return;
        }
        if let Err(error) = self.journal.settle().await {
            // An earlier write's outcome is still unknown: this turn cannot be numbered, so it
            // is not kept.
            for request in running.requests.into_iter().chain(superseded) {
                self.answer(request, Err(error.clone()));
            }
            return;
        }
        let mut record = running.record.take();
        let sent = std::mem::take(&mut record.sent);
        let now = Instant::now();
        let timing = timing::measure(
            &running.before,
            &record.marks,
            &record.tools,
            &record.model_requests,
            now,
        );
        let result = self.check_state_keys(finished.result, &record);
        let (end, failure) = task::settle(
            result,
            &record,
            &running.control,
            &self.key,
            &self.deps.config,
        );
        let decided = outcome::decide(outcome::Ended {
            end,
            failure,
            record,
            messages: running.requests.iter().map(TurnRequest::message).collect(),
            superseded: superseded.iter().map(TurnRequest::message).collect(),
            duration_ms: crate::agent::millis(
                now.saturating_duration_since(running.before.started),
            ),
            timing,
            next_seq: self.journal.next_seq(),
            now_ms: now_ms(),
        });
        // Answers go out only after the store's: a turn it did not acknowledge left nothing
        // behind (or is held apart until read back), so it is never answered as done.
        let writing = (!decided.events.is_empty()).then(Instant::now);
        let ending = decided.ending;
        let saved = self
            .journal
            .commit(decided.events)
            .instrument(tracing::debug_span!(parent: &running.span, "store.append"))
            .await;
        // The one phase the turn's timing record cannot hold: it is written by this write.
        if let Some(writing) = writing {
            metrics::histogram!("turnstile_store_write_seconds", "store" => self.deps.store.name())
                .record(writing.elapsed().as_secs_f64());
        }
        if let (Ok(_), Some((seq, id)), false) = (&saved, ending, sent.is_empty()) {
            self.deps.sent_requests.keep(&self.key, seq, id, sent);
        }
        let conflict = saved.as_ref().err().is_some_and(Error::is_conflict);
        for (request, planned) in running.requests.into_iter().zip(decided.answers) {
            // After a conflict the session reloaded what the store holds: a retry that raced
            // its original there (the original's write landed late) finds it stored, and is
            // answered with its outcome rather than told nothing was kept.
            let stored = match (&request.request_id, conflict) {
                (Some(id), true) => self.stored_answer(id).await,
                _ => None,
            };
            let answer = stored.unwrap_or_else(|| outcome::after_write(&saved, planned));
            self.answer(request, answer);
        }
        for (request, seq) in superseded.into_iter().zip(decided.superseded_seqs) {
            self.answer(request, outcome::superseded_answer(&saved, seq));
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
        self.shared.gauges.publish(self.journal.record());
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

    /// The session as it is in memory: what the store acknowledged.
    pub(crate) fn view(&self) -> SessionView {
        let state = self.journal.state();
        SessionView {
            record: self.journal.record().clone(),
            events: self.journal.window().events().to_vec(),
            user_state: state.user.clone(),
            app_state: state.app.clone(),
            live: true,
            unsaved: self.journal.held_apart(),
        }
    }
}
