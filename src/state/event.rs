//! Events: the entries of a session's append-only log.

use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::scope::StateDelta;
use super::timing::TurnTiming;

/// Position of an event in its session's log. Starts at 1 and never repeats within a session.
pub type Seq = u64;

/// One entry of a session's log. Events are immutable once appended.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the log.
    pub seq: Seq,
    /// Globally unique id, so that exported or forked events stay identifiable.
    pub id: uuid::Uuid,
    /// Who produced the event.
    pub author: Author,
    /// When the event was recorded, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    pub kind: EventKind,
    /// Scoped state changes made by this event; `null` values delete keys. Never holds `temp:` keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "http", schema(value_type = Option<Object>))]
    pub state_delta: Option<StateDelta>,
    /// The caller's request id, on a user input that came with one: a later message with the
    /// same id is answered from the log instead of running again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Where the turn's time went, on the event that ends a turn; see [`TurnTiming`]. Boxed:
    /// most events are not the end of a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Box<TurnTiming>>,
    /// Fields written by a newer version of turnstile: kept and written back unchanged.
    #[serde(flatten)]
    #[cfg_attr(feature = "http", schema(ignore))]
    pub extra: Extra,
}

impl Event {
    /// A new event with a fresh id and no state change.
    pub fn new(seq: Seq, author: Author, at_ms: u64, kind: EventKind) -> Self {
        Self {
            seq,
            id: uuid::Uuid::new_v4(),
            author,
            at_ms,
            kind,
            state_delta: None,
            request_id: None,
            timing: None,
            extra: Extra::default(),
        }
    }

    /// The text a chat transcript would show for this event, if it has one.
    pub fn text(&self) -> Option<&str> {
        match &self.kind {
            EventKind::UserInput { text, .. }
            | EventKind::AgentOutput { text, .. }
            | EventKind::Summary { text, .. }
            | EventKind::Note { text } => Some(text),
            EventKind::TurnFailed { reason, .. } => Some(reason),
            EventKind::ToolCall { .. }
            | EventKind::ToolResult { .. }
            | EventKind::ArtifactSaved { .. }
            | EventKind::ContextCleared {} => None,
        }
    }
}

/// The fields of an [`Event`] that a newer version of turnstile wrote and this one does not know:
/// kept, and written back unchanged. Read and change them through the map this dereferences to.
///
/// Nearly every event has none, so this takes one pointer in the event and allocates only when
/// a field is added: a session's window holds up to twice `window` events, and an inline map
/// would make every one of them 64 bytes larger. (Borrowing the map mutably allocates an empty
/// one if there was none; an empty `Extra` equals, prints and serializes the same either way.)
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// The fields, as a map.
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|map| *map).unwrap_or_default()
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Self((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl From<Extra> for Map<String, Value> {
    fn from(extra: Extra) -> Self {
        extra.into_map()
    }
}

impl FromIterator<(String, Value)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(fields: I) -> Self {
        Self::from(Map::from_iter(fields))
    }
}

impl IntoIterator for Extra {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Extra {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = serde_json::map::IterMut<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Self::Target {
        static NONE: OnceLock<Map<String, Value>> = OnceLock::new();
        self.0
            .as_deref()
            .unwrap_or_else(|| NONE.get_or_init(Map::new))
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<Map<String, Value>> for Extra {
    fn eq(&self, other: &Map<String, Value>) -> bool {
        **self == *other
    }
}

impl PartialEq<Extra> for Map<String, Value> {
    fn eq(&self, other: &Extra) -> bool {
        *self == **other
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Self::from)
    }
}

/// Who produced an event.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Author {
    /// The person talking to the agent.
    User,
    /// The agent (the LLM and the code around it).
    Agent,
    /// A tool the agent called.
    Tool,
    /// turnstile itself: summaries, notes.
    System,
}

/// What an event records.
///
/// A kind this version does not know makes the log unreadable by it; adding one is a
/// `schema_version` change (see `docs/runtime-semantics.md`). `artifact_saved` came with
/// schema version 2 and `turn_failed` with 3: a head that folded one says so (see
/// [`super::SessionRecord::apply`]).
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A message from the user.
    UserInput {
        /// The message.
        text: String,
        /// What became of it.
        #[serde(default)]
        disposition: InputDisposition,
    },
    /// Text produced by the agent for one turn.
    AgentOutput {
        /// The reply, or what was streamed before the turn was cut short.
        text: String,
        /// Whether the turn completed.
        status: OutputStatus,
        /// Wall-clock duration of the turn in milliseconds.
        #[serde(default)]
        duration_ms: u64,
        /// Token usage, when the agent reported it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The agent called a tool.
    ToolCall {
        /// Id pairing the call with its result.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments as given.
        // Boxed: few events are tool calls, and every event is as large as its largest kind.
        #[cfg_attr(feature = "http", schema(value_type = Value))]
        arguments: Box<Value>,
        /// The MCP server the tool came from; absent for the agent's own tools.
        // Boxed (16 bytes, not 24): the largest kind sets every event's size.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "http", schema(value_type = Option<String>))]
        server: Option<Box<str>>,
    },
    /// The result of a tool call.
    ToolResult {
        /// Id of the call this answers.
        call_id: String,
        /// The result (or error description).
        // Boxed, as a call's `arguments` are.
        #[cfg_attr(feature = "http", schema(value_type = Value))]
        result: Box<Value>,
        /// How the call ended.
        status: ToolStatus,
        /// How long the call took, in milliseconds (until it was cancelled, for a cancelled
        /// one); absent in events written before turnstile recorded it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// A summary of older events, written by compaction.
    Summary {
        /// The summary.
        text: String,
        /// The last event the summary covers.
        through_seq: Seq,
    },
    /// A note from turnstile (for example that a turn failed).
    Note {
        /// The note.
        text: String,
    },
    /// `clear_context` was called: the agent's context window starts after this event.
    ContextCleared {},
    /// The turn ended without an answer: its agent (or the model behind it) failed. The turn's
    /// inputs come right before it; nothing else of the turn is kept (no output, tool events or
    /// state changes). Agents leave it, and the inputs it answers, out of the model's context.
    TurnFailed {
        /// The stable code its caller was answered with (`agent_failed`, `model_timeout`…; see
        /// [`crate::FailureKind::code`]).
        code: String,
        /// What happened, as the agent reported it, on one line and at most 1,024 bytes
        /// ([`crate::config::MAX_FAILURE_REASON_BYTES`]). It is shown to whoever reads the
        /// history: an agent keeps secrets out of it (`OpenAiAgent` scrubs its key).
        reason: String,
        /// Wall-clock duration of the turn in milliseconds.
        #[serde(default)]
        duration_ms: u64,
    },
    /// The turn saved a version of an artifact (the bytes are in the artifact store, not here).
    /// A name starting with `user:` is in the user's scope, any other in the session's.
    ArtifactSaved {
        /// The name, as the turn gave it.
        name: String,
        /// The version saved.
        version: u64,
        /// Its size.
        bytes: u64,
        /// Its MIME type.
        mime: String,
    },
}

/// What became of a user message.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputDisposition {
    /// It started a turn of its own.
    #[default]
    Answered,
    /// A newer message arrived before it ran (`Latest` policy); it never ran.
    Superseded,
    /// It was handed to a turn together with other queued messages (`Merge` policy).
    Merged,
}

/// How a turn's output ended.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum OutputStatus {
    /// The agent finished the turn.
    Final,
    /// The turn was cut short; the text is what had been produced.
    Interrupted(InterruptReason),
    /// The agent finished, but its reply stops short of an answer: the model reached its output
    /// token limit or a content filter stopped it (schema version 4). The text is what the model
    /// produced.
    Incomplete(IncompleteReason),
    /// The model refused to answer: the text is its refusal, not an answer (schema version 4).
    Refused,
}

/// Why a finished turn's reply stops short ([`OutputStatus::Incomplete`]).
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum IncompleteReason {
    /// The model reached its limit of output tokens (OpenAI's `finish_reason: "length"`).
    MaxTokens,
    /// A content filter stopped the model (OpenAI's `finish_reason: "content_filter"`).
    ContentFilter,
}

impl IncompleteReason {
    /// The snake-case name, as stored and shown in the HTTP API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::MaxTokens => "max_tokens",
            Self::ContentFilter => "content_filter",
        }
    }
}

/// Why a turn was cut short.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptReason {
    /// `interrupt` was called.
    Requested,
    /// A newer message arrived under the `Latest` policy.
    Superseded,
    /// The turn ran past its deadline.
    Deadline,
    /// The runtime was shutting down.
    Shutdown,
    /// The reply reached the runtime's `max_reply_bytes`: the text is its first that many bytes.
    ReplyLimit,
}

/// How a tool call ended.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool returned a result.
    Ok,
    /// The tool failed; the result describes the failure.
    Error,
    /// The turn was interrupted before the tool finished.
    Cancelled,
}

/// Token usage reported by an agent for one turn.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_event_fields_round_trip_unchanged() {
        let stored = json!({
            "seq": 3, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "author": "agent", "at_ms": 7,
            "kind": {"type": "agent_output", "text": "hi", "status": {"status": "final"},
                     "duration_ms": 5},
            "written_by_v9": {"nested": [1, 2]}
        });
        let event: Event = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(event.extra["written_by_v9"], json!({"nested": [1, 2]}));
        assert_eq!(serde_json::to_value(&event).unwrap(), stored);
    }

    #[test]
    fn an_event_without_unknown_fields_allocates_none_for_them() {
        let mut event: Event = serde_json::from_value(json!({
            "seq": 1, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "author": "user", "at_ms": 7,
            "kind": {"type": "note", "text": "hi"}
        }))
        .unwrap();
        assert!(event.extra.0.is_none(), "{:?}", event.extra);
        assert_eq!(event.extra, Extra::default());
        event.extra.insert("later".into(), json!(1));
        assert_eq!(serde_json::to_value(&event).unwrap()["later"], json!(1));
        assert_eq!(event.extra.clone().into_map().len(), 1);
        let mut expected = Map::new();
        expected.insert("later".into(), json!(1));
        assert_eq!(event.extra, expected);
        assert_eq!(expected, event.extra);
        let pairs: Vec<(&String, &Value)> = (&event.extra).into_iter().collect();
        assert_eq!(pairs, [(&"later".to_owned(), &json!(1))]);
        assert_eq!(Map::from(event.extra.clone()), expected);
        assert_eq!(expected.clone().into_iter().collect::<Extra>(), event.extra);
        event.extra.remove("later");
        // Emptied is the same as never set.
        assert_eq!(event.extra, Extra::default());
        assert_eq!(Extra::from(Map::new()).0, None);
    }

    /// A live session holds up to twice `window` events; this keeps each of them small (it was
    /// 288 bytes with the unknown fields and tool values inline; the boxed `timing` added 8).
    #[test]
    fn an_event_stays_small() {
        assert!(
            std::mem::size_of::<Event>() <= 184,
            "Event is {} bytes",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn an_artifact_saved_event_has_a_stable_form() {
        let kind = EventKind::ArtifactSaved {
            name: "report.pdf".into(),
            version: 3,
            bytes: 10,
            mime: "application/pdf".into(),
        };
        let value = serde_json::to_value(&kind).unwrap();
        assert_eq!(
            value,
            json!({"type": "artifact_saved", "name": "report.pdf", "version": 3, "bytes": 10,
                   "mime": "application/pdf"})
        );
        assert_eq!(serde_json::from_value::<EventKind>(value).unwrap(), kind);
    }

    #[test]
    fn interrupted_output_records_its_reason() {
        let kind = EventKind::AgentOutput {
            text: "par".into(),
            status: OutputStatus::Interrupted(InterruptReason::Superseded),
            duration_ms: 1,
            usage: None,
        };
        let value = serde_json::to_value(&kind).unwrap();
        assert_eq!(
            value["status"],
            json!({"status": "interrupted", "reason": "superseded"})
        );
        assert_eq!(serde_json::from_value::<EventKind>(value).unwrap(), kind);
    }
}
