//! A live session's state and what the actor does with it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use ractor::ActorRef;
use tokio::time::Instant;

use super::turn::{self, Slots, TaskResult, TurnWrite};
use super::{
    SessionArgs, SessionDeps, SessionMsg, SessionShared, SessionView, StopKind, TurnControl,
    TurnFinished, TurnRequest,
};
use crate::agent::{TurnContext, TurnRecord};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{
    Author, Event, EventKind, InterruptReason, OutputStatus, ScopedState, Seq, SessionRecord,
};
use crate::store::StoreError;
use crate::turn::{Outcome, OutcomeKind, OverlapPolicy};

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
    /// The newest events, between `window` and `2 × window` of them (trimmed in halves, so that
    /// trimming is amortised O(1) per event).
    window: Arc<Vec<Event>>,
    /// Events applied in memory that the store has not acknowledged (it failed); written with the
    /// next successful save.
    unsaved: Vec<Event>,
    /// Messages waiting for the running turn to end.
    queue: VecDeque<TurnRequest>,
    running: Option<Running>,
    /// Messages superseded while the current turn runs; recorded and answered when it ends.
    superseded: Vec<TurnRequest>,
    stopping: Option<StopKind>,
    next_turn_id: u64,
    /// The summary's text, shared with turns without copying.
    summary: Option<Arc<str>>,
    /// A compaction task is running (at most one per session).
    compacting: bool,
    /// A turn that completed in place (see `turn::start`), waiting to be recorded.
    immediate: Option<TurnFinished>,
}

/// The turn in flight.
struct Running {
    id: u64,
    requests: Vec<TurnRequest>,
    inputs: Vec<String>,
    control: Arc<TurnControl>,
    record: Arc<Mutex<TurnRecord>>,
    started: Instant,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Live {
    /// Loads the session from the store (activation).
    pub async fn load(args: SessionArgs) -> Result<Self, StoreError> {
        let SessionArgs { key, deps, shared } = args;
        let loaded = deps.store.load(&key, deps.config.window).await?;
        let record = loaded
            .record
            .unwrap_or_else(|| SessionRecord::new(key.clone(), now_ms()));
        let state = ScopedState {
            session: record.state.clone(),
            user: loaded.user_state,
            app: loaded.app_state,
        };
        shared.last_active.store(deps.stamp(), Ordering::Release);
        Ok(Self {
            key,
            deps,
            shared,
            record,
            state: Arc::new(state),
            window: Arc::new(loaded.events),
            unsaved: Vec::new(),
            queue: VecDeque::new(),
            running: None,
            superseded: Vec::new(),
            stopping: None,
            next_turn_id: 0,
            summary: None,
            compacting: false,
            immediate: None,
        }
        .with_summary_cache())
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

    fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// Whether a new turn must first retry saving the backlog (see [`Live::retry_backlog`]).
    pub fn backlog_due(&self) -> bool {
        self.unsaved.len() >= crate::config::MAX_UNSAVED_EVENTS
            && !self.busy()
            && self.stopping.is_none()
    }

    /// Bounds what a failing store leaves in memory. Turns whose save failed stay unsaved (their
    /// callers were told) and are written by the next successful save; past
    /// [`crate::MAX_UNSAVED_EVENTS`], a new turn that finds the session idle first retries that
    /// save, and is refused with the store's error, without running its agent, if it fails
    /// again. Returns the request when it may go on.
    pub async fn retry_backlog(&mut self, request: TurnRequest) -> Option<TurnRequest> {
        match self.flush().await {
            Ok(()) => Some(request),
            Err(error) => {
                self.answer(request, Err(error));
                None
            }
        }
    }

    /// Takes a caller's message: runs it, queues it, or answers it at once, by policy.
    pub fn admit(&mut self, request: TurnRequest, myself: &ActorRef<SessionMsg>) {
        if self.stopping.is_some() {
            // The registry stops routing before it sends `Stop`; this is a safety net only.
            self.answer(request, Err(Error::Draining));
            return;
        }
        if !self.busy() {
            self.start(vec![request], myself);
            return;
        }
        match request.policy {
            _ if request.front => {
                // `interrupt_with` interrupted what ran when it was called; a turn that started
                // since (it was already in the mailbox) is what the user now wants cut short.
                if let Some(running) = &self.running {
                    running.control.interrupt(InterruptReason::Requested);
                }
                // Ahead of the queue, behind earlier `interrupt_with` inputs: they keep their order.
                let at = self.queue.iter().take_while(|r| r.front).count();
                self.queue.insert(at, request);
            }
            OverlapPolicy::Queue | OverlapPolicy::Merge => self.queue.push_back(request),
            OverlapPolicy::Reject => {
                let key = self.key.clone();
                self.answer(request, Err(Error::Busy { key }));
            }
            OverlapPolicy::Latest => {
                if let Some(running) = &self.running {
                    running.control.interrupt(InterruptReason::Superseded);
                }
                self.superseded.extend(self.queue.drain(..));
                self.queue.push_back(request);
            }
        }
    }

    /// Starts the next turn if the session is free; returns whether the actor should now stop.
    pub fn advance(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        if self.running.is_some() {
            return false;
        }
        let refuse = match &self.stopping {
            Some(StopKind::Shutdown) => Some(Error::Draining),
            Some(StopKind::Delete(_)) => Some(Error::Deleted {
                key: self.key.clone(),
            }),
            _ => None,
        };
        if let Some(err) = refuse {
            for request in std::mem::take(&mut self.queue) {
                self.answer(request, Err(err.clone()));
            }
        }
        if let Some(batch) = self.next_batch() {
            self.start(batch, myself);
            return false;
        }
        self.stopping.is_some()
    }

    /// The next turn's messages: the head of the queue, plus every `Merge` message right behind a
    /// `Merge` head.
    fn next_batch(&mut self) -> Option<Vec<TurnRequest>> {
        let first = self.queue.pop_front()?;
        let mut batch = vec![first];
        if batch[0].policy == OverlapPolicy::Merge {
            while self
                .queue
                .front()
                .is_some_and(|r| r.policy == OverlapPolicy::Merge && !r.front)
            {
                batch.extend(self.queue.pop_front());
            }
        }
        Some(batch)
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
        let record = Arc::new(Mutex::new(TurnRecord::default()));
        let inputs: Vec<String> = requests.iter().map(|r| r.input.clone()).collect();
        let deadline = last.deadline.or(self.deps.config.turn_deadline);
        let ctx = TurnContext {
            key: self.key.clone(),
            inputs: inputs.clone(),
            visible: self.visible_events(),
            history: self.window.clone(),
            summary: self
                .record
                .summary
                .as_ref()
                .map(|s| Arc::from(s.text.as_str())),
            state: self.state.clone(),
            attributes: last.attributes.clone(),
            cancel: control.token.clone(),
            sinks: requests
                .iter_mut()
                .filter_map(|r| r.stream.take())
                .collect(),
            record: record.clone(),
        };
        let slots = self.deps.turn_permits.as_ref().map(|permits| Slots {
            permits: permits.clone(),
            wait: self.deps.config.concurrency_wait,
        });
        let id = self.next_turn_id;
        self.next_turn_id += 1;
        let span = tracing::info_span!("turn", key = %self.key, turn = id);
        let work = Box::pin(tracing::Instrument::instrument(
            turn::execute(
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
        if let Some(result) = turn::start(work, myself, id) {
            self.immediate = Some(TurnFinished {
                turn_id: id,
                result,
            });
        }
    }

    pub fn has_immediate(&self) -> bool {
        self.immediate.is_some()
    }

    /// A turn that finished within its first poll, to be recorded before the next message.
    pub fn take_immediate(&mut self) -> Option<TurnFinished> {
        self.immediate.take()
    }

    /// How many of the window's newest events the agent sees: at most `window`, none that the
    /// summary covers or that `clear_context` removed.
    fn visible_events(&self) -> usize {
        let covered = self.covered_through();
        let uncovered = self
            .window
            .iter()
            .rev()
            .take_while(|e| e.seq > covered)
            .count();
        uncovered.min(self.deps.config.window)
    }

    /// Records a finished turn, persists it, and answers its callers.
    pub async fn finish(&mut self, finished: TurnFinished) {
        let Some(running) = self.running.take_if(|r| r.id == finished.turn_id) else {
            return;
        };
        *self.shared.current.lock() = None;
        let superseded = std::mem::take(&mut self.superseded);
        if let Some(StopKind::Delete(_)) = self.stopping {
            let key = self.key.clone();
            for request in running.requests.into_iter().chain(superseded) {
                self.answer(request, Err(Error::Deleted { key: key.clone() }));
            }
            return;
        }
        let record = std::mem::take(&mut *running.record.lock());
        let (output, failure) = match finished.result {
            TaskResult::Completed(text) => (Some((text, OutputStatus::Final)), None),
            TaskResult::Interrupted => {
                let status = OutputStatus::Interrupted(running.control.reason());
                (Some((record.partial.clone(), status)), None)
            }
            TaskResult::Failed(message) => (
                None,
                Some(Error::AgentFailed {
                    key: self.key.clone(),
                    message,
                }),
            ),
            TaskResult::NoSlot => (
                None,
                Some(Error::ConcurrencyLimitExceeded {
                    limit: self.deps.config.max_concurrent_turns.unwrap_or(0),
                }),
            ),
        };
        let superseded_inputs: Vec<String> = superseded.iter().map(|r| r.input.clone()).collect();
        let write = TurnWrite {
            inputs: &running.inputs,
            record,
            output,
            duration_ms: u64::try_from(running.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            superseded: &superseded_inputs,
        };
        let events = turn::turn_events(write, self.record.next_seq, now_ms());
        let answers = answers_for(&running.requests, &events, failure);
        let first_superseded = events.len() - superseded.len();
        let superseded_seqs: Vec<u64> = events[first_superseded..].iter().map(|e| e.seq).collect();
        self.apply(events);
        let saved = self.flush().await;
        for (request, answer) in running.requests.into_iter().zip(answers) {
            let answer = match (&saved, answer) {
                (Err(err), Ok(_)) => Err(err.clone()),
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
                for request in std::mem::take(&mut self.queue) {
                    self.answer(request, Err(err.clone()));
                }
            }
        }
    }

    /// Applies events to the in-memory session and marks them unsaved.
    fn apply(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let state = Arc::make_mut(&mut self.state);
        let window = Arc::make_mut(&mut self.window);
        let mut summary_changed = false;
        for event in &events {
            self.record.apply(event);
            if let Some(delta) = &event.state_delta {
                state.apply(delta);
            }
            summary_changed |= matches!(
                event.kind,
                EventKind::Summary { .. } | EventKind::ContextCleared {}
            );
        }
        window.extend(events.iter().cloned());
        let limit = self.deps.config.window.max(1);
        if window.len() >= 2 * limit {
            window.drain(..window.len() - limit);
        }
        if summary_changed {
            self.refresh_summary();
        }
        self.unsaved.extend(events);
        self.shared.dirty.store(true, Ordering::Release);
    }

    /// Writes unsaved events to the store. On a conflict (another writer changed the session)
    /// the session reloads from the store and the unsaved events are dropped: they were never
    /// acknowledged.
    async fn flush(&mut self) -> Result<(), Error> {
        if self.unsaved.is_empty() {
            return Ok(());
        }
        let store = self.deps.store.clone();
        match store
            .append(&self.key, self.record.version, &self.unsaved)
            .await
        {
            Ok(version) => {
                self.record.version = version;
                // Dropped, not cleared: an idle session should not keep the buffer's capacity.
                self.unsaved = Vec::new();
                self.shared.dirty.store(false, Ordering::Release);
                Ok(())
            }
            Err(err) => {
                let conflict = matches!(err, StoreError::Conflict { .. });
                let error = Error::store(&self.key, err);
                tracing::warn!(key = %self.key, %error, "turn not persisted");
                if conflict {
                    self.reload().await;
                }
                Err(error)
            }
        }
    }

    async fn reload(&mut self) {
        let args = SessionArgs {
            key: self.key.clone(),
            deps: self.deps.clone(),
            shared: self.shared.clone(),
        };
        match Live::load(args).await {
            Ok(fresh) => {
                self.record = fresh.record;
                self.state = fresh.state;
                self.window = fresh.window;
                self.unsaved.clear();
                self.shared.dirty.store(false, Ordering::Release);
            }
            Err(err) => {
                tracing::error!(key = %self.key, error = %err, "reload after a conflict failed");
            }
        }
    }

    fn answer(&self, request: TurnRequest, answer: Result<Outcome, Error>) {
        metrics::histogram!("turnstile_turn_seconds")
            .record(request.admitted.elapsed().as_secs_f64());
        if let Err(err) = &answer {
            metrics::counter!("turnstile_turn_errors_total", "code" => err.code()).increment(1);
            if matches!(err, Error::Busy { .. }) {
                metrics::counter!("turnstile_rejections_total", "reason" => "busy").increment(1);
            }
        }
        // The caller may have stopped waiting; the turn still counts as done.
        let _ = request.reply.send(answer);
        self.shared
            .last_active
            .store(self.deps.stamp(), Ordering::Release);
        self.shared.pending.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes a stop request from the registry.
    pub fn begin_stop(&mut self, kind: StopKind) {
        let reason = match &kind {
            StopKind::Passivate => None,
            StopKind::Shutdown => Some(InterruptReason::Shutdown),
            StopKind::Delete(_) => Some(InterruptReason::Requested),
        };
        if let (Some(reason), Some(running)) = (reason, &self.running) {
            running.control.interrupt(reason);
        }
        match (&self.stopping, kind) {
            // A delete already under way is not downgraded; a passivation becomes a shutdown.
            (Some(StopKind::Delete(_)), StopKind::Delete(reply)) => {
                let _ = reply.send(Ok(false));
            }
            (Some(StopKind::Delete(_)), _) => {}
            (_, kind) => self.stopping = Some(kind),
        }
    }

    /// The last step before the actor stops: delete, or flush what is unsaved.
    pub async fn finish_stop(&mut self) {
        match self.stopping.take() {
            Some(StopKind::Delete(reply)) => {
                self.unsaved.clear();
                self.shared.dirty.store(false, Ordering::Release);
                let result = self
                    .deps
                    .store
                    .delete(&self.key)
                    .await
                    .map_err(|err| Error::store(&self.key, err));
                let _ = reply.send(result);
            }
            _ => {
                let _ = self.flush().await;
            }
        }
    }

    /// `post_stop`: one more attempt for anything still unsaved.
    pub async fn final_flush(&mut self) {
        if self.unsaved.is_empty() {
            return;
        }
        if let Err(error) = self.flush().await {
            tracing::error!(
                key = %self.key,
                unsaved = self.unsaved.len(),
                %error,
                "session stopped with events the store never acknowledged"
            );
        }
    }

    /// Appends a `ContextCleared` event: the agent's window starts after it; state is kept.
    pub async fn clear_context(&mut self) -> Result<(), Error> {
        let event = Event::new(
            self.record.next_seq,
            Author::System,
            now_ms(),
            EventKind::ContextCleared {},
        );
        self.apply(vec![event]);
        self.flush().await
    }

    /// Starts a compaction when more than `compact_after` events are not covered by the summary:
    /// a child task summarises everything older than the window (read back from the store, so
    /// only persisted events are summarised) and reports with `Compacted`. Turns go on meanwhile.
    pub fn maybe_compact(&mut self, myself: &ActorRef<SessionMsg>) {
        let (Some(summarizer), Some(after)) =
            (self.deps.summarizer.clone(), self.deps.config.compact_after)
        else {
            return;
        };
        if self.compacting || self.stopping.is_some() || !self.unsaved.is_empty() {
            return;
        }
        let covered = self.covered_through();
        let last = self.record.next_seq.saturating_sub(1);
        let upto = last.saturating_sub(self.deps.config.window as Seq);
        if last - covered <= after as Seq || upto <= covered {
            return;
        }
        self.compacting = true;
        let previous = self.summary.clone();
        let (store, key, actor) = (self.deps.store.clone(), self.key.clone(), myself.clone());
        tokio::spawn(async move {
            let summary = async {
                let limit = usize::try_from(upto - covered).unwrap_or(usize::MAX);
                let span: Vec<Event> = store
                    .read_events(&key, covered + 1, limit)
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .filter(|e| !matches!(e.kind, EventKind::Summary { .. }))
                    .collect();
                summarizer
                    .summarize(previous.as_deref(), &span)
                    .await
                    .map_err(|e| e.to_string())
            }
            .await;
            let _ = actor.send_message(SessionMsg::Compacted {
                through_seq: upto,
                summary,
            });
        });
    }

    /// Records a finished compaction as a `Summary` event (events that arrived meanwhile are
    /// after `through_seq`, so none is lost).
    pub async fn compacted(&mut self, through_seq: Seq, summary: Result<String, String>) {
        self.compacting = false;
        let text = match summary {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "compaction failed; will retry");
                return;
            }
        };
        if through_seq <= self.covered_through() || self.stopping.is_some() {
            return;
        }
        let event = Event::new(
            self.record.next_seq,
            Author::System,
            now_ms(),
            EventKind::Summary { text, through_seq },
        );
        self.apply(vec![event]);
        let _ = self.flush().await;
    }

    /// The session as it is in memory.
    pub fn view(&self) -> SessionView {
        SessionView {
            record: self.record.clone(),
            events: self.window.to_vec(),
            user_state: self.state.user.clone(),
            app_state: self.state.app.clone(),
            live: true,
            unsaved: self.unsaved.len(),
        }
    }
}

/// The answer for each message of a turn: the last message gets the turn's outcome, earlier
/// (merged) ones `Merged` with the same output.
fn answers_for(
    requests: &[TurnRequest],
    events: &[Event],
    failure: Option<Error>,
) -> Vec<Result<Outcome, Error>> {
    if let Some(err) = failure {
        return requests.iter().map(|_| Err(err.clone())).collect();
    }
    let output = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::AgentOutput { text, status, .. } => Some((e.seq, text.clone(), *status)),
        _ => None,
    });
    let Some((seq, text, status)) = output else {
        return Vec::new();
    };
    let last_kind = match status {
        OutputStatus::Final => OutcomeKind::Completed,
        OutputStatus::Interrupted(reason) => OutcomeKind::Interrupted(reason),
    };
    let n = requests.len();
    (0..n)
        .map(|i| {
            Ok(Outcome {
                kind: if i + 1 == n {
                    last_kind
                } else {
                    OutcomeKind::Merged
                },
                output: text.clone(),
                seq,
            })
        })
        .collect()
}
