//! Building a [`TurnContext`] by hand, so that an agent runs outside a runtime (unit tests of an
//! agent, tools, benchmarks), and reading back what its turn produced.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{TurnContext, TurnRecord};
use crate::agent::Attributes;
use crate::artifact::ArtifactStore;
use crate::key::SessionKey;
use crate::memory::MemoryStore;
use crate::state::{persistable, Event, ScopedState, StateDelta, Usage};
use crate::state_keys::StateKeys;

/// Builds a [`TurnContext`]; start with [`TurnContext::builder`].
///
/// Everything but the key is optional: no input, an empty history, no summary, empty state, no
/// attributes, a fresh cancellation token and no stream.
///
/// ```
/// use turnstile::{Agent, MockLlmAgent, SessionKey, Streamed, TurnContext};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let key = SessionKey::new("ada", "chat-1").unwrap();
/// let (stream, mut chunks) = tokio::sync::mpsc::channel(16);
/// let (turn, recording) = TurnContext::builder(key)
///     .input("hello")
///     .stream(stream)
///     .build();
/// let reply = MockLlmAgent::new().run(turn).await.unwrap();
///
/// let mut streamed = String::new();
/// while let Some(event) = chunks.recv().await {
///     if let Streamed::Chunk(chunk) = event {
///         streamed.push_str(&chunk);
///     }
/// }
/// assert_eq!(streamed, reply);
/// assert_eq!(recording.output(), reply);
/// assert!(recording.usage().is_some());
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct TurnContextBuilder {
    key: SessionKey,
    inputs: Vec<String>,
    // The optional parts stay `None` until given, so that the runtime, which gives them all on
    // every turn, never allocates a default only to drop it.
    history: Option<Arc<Vec<Event>>>,
    /// How many of the newest `history` events the agent sees; `None` means all of them.
    visible: Option<usize>,
    summary: Option<Arc<str>>,
    state: Option<Arc<ScopedState>>,
    attributes: Option<Attributes>,
    cancel: Option<CancellationToken>,
    sinks: Vec<mpsc::Sender<crate::call::Streamed>>,
    // --- artifacts and declared state keys ---
    artifacts: Option<Arc<dyn ArtifactStore>>,
    state_keys: Option<Arc<StateKeys>>,
    /// The user's memory and how many entries to recall before the turn.
    memory: Option<super::recall::Recall>,
    /// Largest reply; see [`TurnContextBuilder::max_reply_bytes`].
    max_reply_bytes: usize,
    /// Whose memory recall searches, when not the session's.
    memory_user: Option<String>,
}

impl TurnContext {
    /// Starts building the context of one turn of session `key`, for running an agent outside a
    /// runtime. The runtime builds its own; this is for tests and tools.
    pub fn builder(key: SessionKey) -> TurnContextBuilder {
        TurnContextBuilder {
            key,
            inputs: Vec::new(),
            history: None,
            visible: None,
            summary: None,
            state: None,
            attributes: None,
            cancel: None,
            sinks: Vec::new(),
            artifacts: None,
            state_keys: None,
            memory: None,
            max_reply_bytes: crate::config::DEFAULT_MAX_REPLY_BYTES,
            memory_user: None,
        }
    }
}

impl TurnContextBuilder {
    /// Adds a message the turn answers. Called more than once, it builds a merged turn (as the
    /// `Merge` policy does): [`TurnContext::inputs`] lists them, oldest first.
    pub fn input(mut self, input: impl Into<String>) -> Self {
        self.inputs.push(input.into());
        self
    }

    /// The context window before this turn, oldest first; the agent sees all of it.
    pub fn history(mut self, events: impl Into<Arc<Vec<Event>>>) -> Self {
        self.history = Some(events.into());
        self.visible = None;
        self
    }

    /// The summary of older events, as compaction would have left it.
    pub fn summary(mut self, summary: impl Into<Arc<str>>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// Session, user and app state as the turn starts.
    pub fn state(mut self, state: impl Into<Arc<ScopedState>>) -> Self {
        self.state = Some(state.into());
        self
    }

    /// Per-call attributes.
    pub fn attributes(mut self, attributes: Attributes) -> Self {
        self.attributes = Some(attributes);
        self
    }

    /// The token that interrupts the turn; cancel it to see how the agent stops.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Adds a stream that receives every chunk the agent emits. A full stream holds the agent
    /// back (as a slow caller would); a closed one is skipped.
    pub fn stream(mut self, sink: mpsc::Sender<crate::call::Streamed>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Where the turn's [`TurnContext::save_artifact`] and [`TurnContext::load_artifact`] go.
    pub fn artifacts(mut self, store: Arc<dyn ArtifactStore>) -> Self {
        self.artifacts = Some(store);
        self
    }

    /// Declared state keys: an unset declared key reads as its default.
    pub fn state_keys(mut self, keys: Arc<StateKeys>) -> Self {
        self.state_keys = Some(keys);
        self
    }

    /// The user's memory, searched by [`TurnContext::recall`]; with `auto_recall`, the runtime
    /// recalls that many entries with the input before the agent runs.
    pub fn memory(mut self, store: Arc<dyn MemoryStore>, auto_recall: Option<usize>) -> Self {
        self.memory = Some(super::recall::Recall::new(store, auto_recall));
        self
    }

    /// The largest reply the turn may emit (default
    /// [`DEFAULT_MAX_REPLY_BYTES`](crate::config::DEFAULT_MAX_REPLY_BYTES)): an emit past it
    /// keeps the bytes up to it, cancels the turn and never returns (see
    /// [`TurnContext::emit`]).
    pub fn max_reply_bytes(mut self, max: usize) -> Self {
        self.max_reply_bytes = max;
        self
    }

    /// Recalls from `user`'s memory instead of the session's (see
    /// [`CallOptions::memory_user`](crate::CallOptions::memory_user)); takes effect with
    /// [`TurnContextBuilder::memory`].
    pub fn memory_user(mut self, user: impl Into<String>) -> Self {
        self.memory_user = Some(user.into());
        self
    }

    /// Shows the agent only the newest `visible` events of `history`: the runtime keeps more
    /// events than its window, and hides those the summary covers.
    pub(crate) fn visible(mut self, visible: usize) -> Self {
        self.visible = Some(visible);
        self
    }

    /// The turn's context, and the recording of what the turn produces through it.
    pub fn build(self) -> (TurnContext, TurnRecording) {
        let recording = TurnRecording::default();
        let history = self.history.unwrap_or_default();
        let visible = self.visible.unwrap_or(history.len()).min(history.len());
        let turn = TurnContext {
            key: self.key,
            inputs: self.inputs,
            history,
            visible,
            summary: self.summary,
            state: self.state.unwrap_or_default(),
            attributes: self.attributes.unwrap_or_default(),
            cancel: self.cancel.unwrap_or_default(),
            sinks: self.sinks,
            unsent: Default::default(),
            record: recording.record.clone(),
            artifacts: self.artifacts,
            state_keys: self.state_keys,
            memory: self.memory.map(|recall| recall.for_user(self.memory_user)),
            max_reply_bytes: self.max_reply_bytes,
        };
        (turn, recording)
    }
}

/// What a turn produced through its [`TurnContext`]: the emitted output, state writes and
/// reported usage. Readable while the turn runs and after it ended or was dropped, as the runtime
/// reads it when a turn is cut short.
#[derive(Debug, Clone, Default)]
pub struct TurnRecording {
    /// Shared with the turn's context.
    record: Arc<Mutex<TurnRecord>>,
}

impl TurnRecording {
    /// Every chunk emitted so far, concatenated: the partial output of an interrupted turn.
    pub fn output(&self) -> String {
        self.record.lock().partial.clone()
    }

    /// Every state write so far, full keys with their scope prefix (`temp:` keys included), the
    /// later write of a key winning; a removed key maps to `null`.
    pub fn delta(&self) -> StateDelta {
        self.record.lock().delta.clone()
    }

    /// The part of [`TurnRecording::delta`] a session would persist: without `temp:` keys.
    pub fn persisted_delta(&self) -> StateDelta {
        persistable(self.delta())
    }

    /// The token usage the agent reported, if it did.
    pub fn usage(&self) -> Option<Usage> {
        self.record.lock().usage
    }

    /// Whether the turn's reply reached its largest size and the turn was cut short there.
    pub fn reply_limited(&self) -> bool {
        self.record.lock().reply_limited
    }

    /// The requests the agent recorded sending its model so far
    /// ([`TurnContext::model_request_sent`]), in the order sent.
    pub fn sent_requests(&self) -> Vec<crate::agent::SentRequest> {
        self.record.lock().sent.clone()
    }

    /// The model requests marked so far (left in place).
    #[cfg(test)]
    fn model_requests_for_test(&self) -> Vec<super::ModelRequestMarks> {
        self.record.lock().model_requests.clone()
    }

    /// Takes what the turn recorded, leaving it empty (the runtime, once the turn ended).
    pub(crate) fn take(&self) -> TurnRecord {
        std::mem::take(&mut *self.record.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Streamed;
    use crate::state::{Author, EventKind, InputDisposition};
    use serde_json::json;

    fn key() -> SessionKey {
        SessionKey::new("u", "s").unwrap()
    }

    fn input(seq: u64) -> Event {
        Event::new(
            seq,
            Author::User,
            0,
            EventKind::UserInput {
                text: format!("m{seq}"),
                disposition: InputDisposition::Answered,
            },
        )
    }

    #[test]
    fn a_built_context_shows_what_it_was_given() {
        let mut state = ScopedState::default();
        state.session.insert("topic".into(), json!("rust"));
        let (turn, _) = TurnContext::builder(key())
            .input("a")
            .input("b")
            .history(vec![input(1), input(2)])
            .summary("earlier")
            .state(state)
            .build();
        assert_eq!(turn.key(), &key());
        assert_eq!(turn.inputs(), ["a", "b"]);
        assert_eq!(turn.input(), "a\n\nb");
        assert_eq!(turn.history().len(), 2);
        assert_eq!(turn.summary(), Some("earlier"));
        assert_eq!(turn.get("topic"), Some(json!("rust")));
        assert_eq!(turn.messages().len(), 3, "memory block and two inputs");
    }

    #[test]
    fn sent_requests_are_kept_in_order_within_the_turns_bounds() {
        use crate::agent::{SentRequest, MAX_SENT_BODY_BYTES, MAX_SENT_BYTES_PER_TURN};
        let (turn, recording) = TurnContext::builder(key()).build();
        let big = "x".repeat(MAX_SENT_BODY_BYTES);
        let rounds = (MAX_SENT_BYTES_PER_TURN / MAX_SENT_BODY_BYTES) as u32;
        for round in 1..=70 {
            turn.model_request_sent(SentRequest::new(round, "POST", "http://h/", vec![], &big));
        }
        let sent = recording.sent_requests();
        assert_eq!(sent.len(), crate::state::TurnTiming::MAX_MODEL_REQUESTS);
        assert!(sent.iter().map(|r| r.round).eq(1..=64));
        for request in &sent[..rounds as usize] {
            assert_eq!(
                request.body.len(),
                MAX_SENT_BODY_BYTES,
                "round {}",
                request.round
            );
            assert!(!request.truncated);
        }
        for request in &sent[rounds as usize..] {
            assert!(
                request.body.is_empty() && request.truncated,
                "round {}",
                request.round
            );
            assert_eq!(request.body_bytes, MAX_SENT_BODY_BYTES);
        }
    }

    #[test]
    fn model_requests_are_marked_once_each_and_bounded() {
        let (turn, recording) = TurnContext::builder(key()).build();
        let first = turn.model_request_started(1, 1);
        turn.model_request_answered(first, 503);
        // A second answer or end of the same request changes nothing.
        turn.model_request_answered(first, 200);
        turn.model_request_ended(first);
        let ended = recording.model_requests_for_test()[0].ended;
        turn.model_request_ended(first);
        for attempt in 2..=70 {
            turn.model_request_started(1, attempt);
        }
        let marks = recording.model_requests_for_test();
        assert_eq!(marks.len(), crate::state::TurnTiming::MAX_MODEL_REQUESTS);
        assert_eq!((marks[0].status, marks[0].ended), (Some(503), ended));
        assert!(marks[0].answered.is_some() && ended.is_some());
        assert_eq!(marks[63].attempt, 64, "the later ones are left out");
        // A request past the bound is not marked, and marking it later is harmless.
        let past = turn.model_request_started(2, 1);
        turn.model_request_answered(past, 200);
        turn.model_request_ended(past);
        assert_eq!(recording.model_requests_for_test().len(), 64);
    }

    #[test]
    fn the_visible_count_hides_the_oldest_events() {
        let (turn, _) = TurnContext::builder(key())
            .history(vec![input(1), input(2), input(3)])
            .visible(2)
            .build();
        let seqs: Vec<u64> = turn.history().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [2, 3]);
    }

    #[tokio::test]
    async fn the_recording_returns_output_state_and_usage() {
        let (stream, mut chunks) = mpsc::channel(8);
        let (turn, recording) = TurnContext::builder(key()).stream(stream).build();
        turn.emit("hel").await;
        let call = turn.tool_call("look", json!({"q": 1}));
        turn.tool_result(&call, Ok(json!("found")));
        turn.emit("lo").await;
        turn.set("user:name", "Ada");
        turn.set("temp:scratch", 1);
        turn.remove("gone");
        turn.report_usage(Usage {
            input_tokens: 1,
            output_tokens: 2,
        });
        drop(turn);
        // The tool events go out, in order, before the next chunk.
        let mut shown = Vec::new();
        while let Some(event) = chunks.recv().await {
            shown.push(match event {
                Streamed::Chunk(text) => text,
                Streamed::ToolCall(called) => {
                    assert_eq!(called.call_id, call);
                    format!("call {}", called.name)
                }
                Streamed::ToolResult(done) => format!("result {} {}", done.result, done.ok),
            });
        }
        assert_eq!(shown, ["hel", "call look", "result \"found\" true", "lo"]);
        assert_eq!(recording.output(), "hello");
        let delta = recording.delta();
        assert_eq!(delta.get("temp:scratch"), Some(&json!(1)));
        assert_eq!(delta.get("gone"), Some(&serde_json::Value::Null));
        let persisted = recording.persisted_delta();
        assert_eq!(persisted.get("user:name"), Some(&json!("Ada")));
        assert!(!persisted.contains_key("temp:scratch"));
        assert_eq!(recording.usage().map(|u| u.output_tokens), Some(2));
    }

    #[tokio::test]
    async fn an_emit_past_the_reply_limit_keeps_what_fits_and_cancels_the_turn() {
        let (turn, recording) = TurnContext::builder(key()).max_reply_bytes(5).build();
        turn.emit("abc").await;
        assert!(!recording.reply_limited());
        let cut =
            tokio::time::timeout(std::time::Duration::from_millis(50), turn.emit("déf")).await;
        assert!(cut.is_err(), "an emit past the limit never returns");
        assert!(turn.cancellation().is_cancelled());
        assert!(recording.reply_limited());
        // "abc" + "d" fits in 5 bytes; "é" (2 bytes) does not.
        assert_eq!(recording.output(), "abcd");
    }
}
