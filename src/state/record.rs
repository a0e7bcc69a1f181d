//! The persisted head of a session: metadata, session-scoped state and statistics, as the fold of
//! its events.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::event::{Event, EventKind, InputDisposition, InterruptReason, OutputStatus, Seq};
use super::scope::{set_or_remove, Scope, StateMap};
use crate::key::SessionKey;

/// The persisted-form version this build writes and the newest it reads.
///
/// Version 1 is the first. Version 2 adds the `artifact_saved` event kind: a head is raised to 2
/// only when it folds such an event, so sessions without artifacts stay readable by builds that
/// know only version 1, and one with artifacts is refused by them as newer instead of failing
/// on an event kind they do not know. Version 3 adds, the same way, the `turn_failed` event kind
/// and the interrupt reason `reply_limit`, and version 4 the output statuses `incomplete` and
/// `refused`. Readers refuse anything newer (see
/// [`SchemaError::Newer`]); fields they do not know in a record of their own version are kept
/// and written back unchanged.
pub const SCHEMA_VERSION: u32 = 4;

/// The version a new head starts at: the oldest that can hold it (see [`SCHEMA_VERSION`]).
pub(crate) const FIRST_SCHEMA_VERSION: u32 = 1;

/// The version that introduced `artifact_saved` events.
const ARTIFACTS_SCHEMA_VERSION: u32 = 2;

/// The version that introduced `turn_failed` events and the interrupt reason `reply_limit`.
const FAILED_TURNS_SCHEMA_VERSION: u32 = 3;

/// The version that introduced the output statuses `incomplete` and `refused`.
const ENDINGS_SCHEMA_VERSION: u32 = 4;

/// Why persisted data could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// Written by a newer turnstile; reading it could lose that version's data.
    #[error("schema_version {found} is newer than this build supports ({supported}); upgrade turnstile to read it")]
    Newer {
        /// The version found.
        found: u32,
        /// [`SCHEMA_VERSION`].
        supported: u32,
    },
    /// Not valid JSON, or not the expected shape.
    #[error("not a valid session record: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// The head of a persisted session: everything but the events themselves.
///
/// It is the fold of the session's events ([`SessionRecord::apply`]), kept materialised so that
/// loading a session does not replay its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Version of the persisted form.
    pub schema_version: u32,
    /// The session.
    pub key: SessionKey,
    /// Compare-and-set version: bumped by every successful write; 0 means never stored.
    pub version: u64,
    /// The sequence number the next event will get.
    pub next_seq: Seq,
    /// When the session was created, in Unix milliseconds.
    pub created_ms: u64,
    /// When the session last changed, in Unix milliseconds.
    pub updated_ms: u64,
    /// Session-scoped state (keys without prefix).
    #[serde(default)]
    pub state: StateMap,
    /// The newest summary of older events, if the session was ever compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryRecord>,
    /// Events up to and including this sequence number were removed from the context window by
    /// `clear_context`; 0 when never cleared.
    #[serde(default)]
    pub cleared_through: Seq,
    /// Counters kept by the runtime.
    #[serde(default)]
    pub stats: SessionStats,
    /// The last turn was cut short by a shutdown; the next activation may tell the user.
    #[serde(default)]
    pub shutdown_interrupted: bool,
    /// Fields written by a newer turnstile of the same schema version: kept unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The current summary of a compacted session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRecord {
    /// The summary text.
    pub text: String,
    /// The last event it covers.
    pub through_seq: Seq,
}

/// Per-session counters, folded from the events.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionStats {
    /// Events in the log.
    pub events: u64,
    /// Turns that produced output (completed or interrupted).
    pub turns: u64,
    /// Turns cut short.
    pub interrupted: u64,
    /// Turns that failed (`turn_failed` events): not counted in `turns`.
    pub failed: u64,
    /// User messages superseded before they ran.
    pub superseded: u64,
    /// User messages merged into a shared turn.
    pub merged: u64,
    /// Summaries written by compaction.
    pub compactions: u64,
    /// Sum of turn durations, in milliseconds.
    pub total_turn_ms: u64,
    /// Longest turn, in milliseconds.
    pub longest_turn_ms: u64,
    /// Prompt tokens reported by the agent.
    pub input_tokens: u64,
    /// Completion tokens reported by the agent.
    pub output_tokens: u64,
    /// Approximate bytes of the serialised events.
    pub bytes: u64,
}

impl SessionRecord {
    /// The head of a session that has no events yet.
    pub fn new(key: SessionKey, now_ms: u64) -> Self {
        Self {
            schema_version: FIRST_SCHEMA_VERSION,
            key,
            version: 0,
            next_seq: 1,
            created_ms: now_ms,
            updated_ms: now_ms,
            state: StateMap::new(),
            summary: None,
            cleared_through: 0,
            stats: SessionStats::default(),
            shutdown_interrupted: false,
            extra: Map::new(),
        }
    }

    /// Folds one event into the head: session-scoped state, sequence, statistics, summary.
    ///
    /// `user:` and `app:` keys are not folded here: the store keeps them once per user and once
    /// per application (see [`super::SplitDelta`]).
    ///
    /// Counters saturate: an event read back from a store may carry any number, and folding it
    /// must neither panic nor wrap around.
    pub fn apply(&mut self, event: &Event) {
        self.next_seq = self.next_seq.max(event.seq.saturating_add(1));
        self.updated_ms = self.updated_ms.max(event.at_ms);
        if let Some(delta) = &event.state_delta {
            for (key, value) in delta {
                if let (Scope::Session, k) = Scope::split(key) {
                    set_or_remove(&mut self.state, k, value);
                }
            }
        }
        let stats = &mut self.stats;
        stats.events = stats.events.saturating_add(1);
        stats.bytes = stats.bytes.saturating_add(approximate_size(event));
        match &event.kind {
            EventKind::UserInput { disposition, .. } => match disposition {
                InputDisposition::Answered => {}
                InputDisposition::Superseded => add(&mut stats.superseded, 1),
                InputDisposition::Merged => add(&mut stats.merged, 1),
            },
            EventKind::AgentOutput {
                status,
                duration_ms,
                usage,
                ..
            } => {
                add(&mut stats.turns, 1);
                if matches!(status, OutputStatus::Interrupted(_)) {
                    add(&mut stats.interrupted, 1);
                }
                let needs = match status {
                    OutputStatus::Interrupted(InterruptReason::ReplyLimit) => {
                        FAILED_TURNS_SCHEMA_VERSION
                    }
                    OutputStatus::Incomplete(_) | OutputStatus::Refused => ENDINGS_SCHEMA_VERSION,
                    OutputStatus::Final | OutputStatus::Interrupted(_) => FIRST_SCHEMA_VERSION,
                };
                self.schema_version = self.schema_version.max(needs);
                self.shutdown_interrupted =
                    matches!(status, OutputStatus::Interrupted(InterruptReason::Shutdown));
                add(&mut stats.total_turn_ms, *duration_ms);
                stats.longest_turn_ms = stats.longest_turn_ms.max(*duration_ms);
                if let Some(usage) = usage {
                    add(&mut stats.input_tokens, usage.input_tokens);
                    add(&mut stats.output_tokens, usage.output_tokens);
                }
            }
            EventKind::Summary { text, through_seq } => {
                add(&mut stats.compactions, 1);
                self.summary = Some(SummaryRecord {
                    text: text.clone(),
                    through_seq: *through_seq,
                });
            }
            EventKind::ContextCleared {} => {
                self.cleared_through = event.seq;
                self.summary = None;
            }
            EventKind::ArtifactSaved { .. } => {
                self.schema_version = self.schema_version.max(ARTIFACTS_SCHEMA_VERSION);
            }
            EventKind::TurnFailed { .. } => {
                add(&mut stats.failed, 1);
                self.shutdown_interrupted = false;
                self.schema_version = self.schema_version.max(FAILED_TURNS_SCHEMA_VERSION);
            }
            EventKind::ToolCall { .. } | EventKind::ToolResult { .. } | EventKind::Note { .. } => {}
        }
    }

    /// Reads a record from JSON, refusing a newer schema before looking at anything else.
    pub fn from_json(bytes: &[u8]) -> Result<Self, SchemaError> {
        let value: Value = serde_json::from_slice(bytes)?;
        check_schema(&value)?;
        Ok(serde_json::from_value(value)?)
    }
}

/// Adds to a counter, stopping at its maximum.
fn add(counter: &mut u64, amount: u64) {
    *counter = counter.saturating_add(amount);
}

/// A cheap estimate of an event's serialised size, for statistics only.
fn approximate_size(event: &Event) -> u64 {
    const OVERHEAD: usize = 160;
    let text = event.text().map_or(0, str::len);
    let delta = event.state_delta.as_ref().map_or(0, |d| d.len() * 32);
    (OVERHEAD + text + delta) as u64
}

/// Refuses a JSON document whose `schema_version` is newer than [`SCHEMA_VERSION`].
pub fn check_schema(value: &Value) -> Result<(), SchemaError> {
    let found = value
        .get("schema_version")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if found > u64::from(SCHEMA_VERSION) {
        return Err(SchemaError::Newer {
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, StateDelta, Usage};
    use serde_json::json;

    fn key() -> SessionKey {
        SessionKey::new("u", "s").unwrap()
    }

    fn output(seq: Seq, status: OutputStatus, ms: u64) -> Event {
        let mut e = Event::new(
            seq,
            Author::Agent,
            100 + seq,
            EventKind::AgentOutput {
                text: "x".into(),
                status,
                duration_ms: ms,
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                }),
            },
        );
        let delta: StateDelta = [
            ("count".to_owned(), json!(seq)),
            ("user:seen".to_owned(), json!(true)),
        ]
        .into();
        e.state_delta = Some(delta);
        e
    }

    #[test]
    fn the_fold_counts_turns_and_keeps_session_state_only() {
        let mut record = SessionRecord::new(key(), 1);
        record.apply(&output(1, OutputStatus::Final, 10));
        record.apply(&output(
            2,
            OutputStatus::Interrupted(InterruptReason::Requested),
            30,
        ));
        assert_eq!(record.next_seq, 3);
        assert_eq!(record.state, StateMap::from([("count".into(), json!(2))]));
        assert_eq!(record.stats.turns, 2);
        assert_eq!(record.stats.interrupted, 1);
        assert_eq!(record.stats.longest_turn_ms, 30);
        assert_eq!(record.stats.total_turn_ms, 40);
        assert_eq!(record.stats.output_tokens, 8);
        assert_eq!(record.updated_ms, 102);
    }

    #[test]
    fn unknown_record_fields_round_trip() {
        let mut value = serde_json::to_value(SessionRecord::new(key(), 1)).unwrap();
        value["from_the_future"] = json!({"keep": "me"});
        let bytes = serde_json::to_vec(&value).unwrap();
        let record = SessionRecord::from_json(&bytes).unwrap();
        assert_eq!(serde_json::to_value(&record).unwrap(), value);
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_error() {
        let mut value = serde_json::to_value(SessionRecord::new(key(), 1)).unwrap();
        value["schema_version"] = json!(SCHEMA_VERSION + 1);
        let err = SessionRecord::from_json(&serde_json::to_vec(&value).unwrap()).unwrap_err();
        assert!(matches!(err, SchemaError::Newer { found, .. } if found == SCHEMA_VERSION + 1));
        assert!(err.to_string().contains("upgrade turnstile"));
    }

    #[test]
    fn corrupt_records_are_an_error_not_an_empty_session() {
        assert!(matches!(
            SessionRecord::from_json(b"{\"schema_version\": 1, \"key\": 5"),
            Err(SchemaError::Corrupt(_))
        ));
        assert!(matches!(
            SessionRecord::from_json(b"{\"schema_version\": 1}"),
            Err(SchemaError::Corrupt(_))
        ));
    }

    #[test]
    fn folding_extreme_stored_numbers_saturates_instead_of_panicking() {
        let mut record = SessionRecord::new(key(), 1);
        let event = Event::new(
            u64::MAX,
            Author::Agent,
            u64::MAX,
            EventKind::AgentOutput {
                text: String::new(),
                status: OutputStatus::Final,
                duration_ms: u64::MAX,
                usage: Some(Usage {
                    input_tokens: u64::MAX,
                    output_tokens: u64::MAX,
                }),
            },
        );
        record.apply(&event);
        record.apply(&event);
        assert_eq!(record.next_seq, u64::MAX);
        assert_eq!(record.stats.total_turn_ms, u64::MAX);
        assert_eq!(record.stats.input_tokens, u64::MAX);
        assert_eq!(record.stats.turns, 2);
    }

    #[test]
    fn float_state_reads_back_exactly_as_written() {
        // Parsed without `float_roundtrip`, this value came back one unit off on each read.
        let mut record = SessionRecord::new(key(), 1);
        record
            .state
            .insert("f".into(), json!(4.867870875715011e245));
        let bytes = serde_json::to_vec(&record).unwrap();
        let once = SessionRecord::from_json(&bytes).unwrap();
        let twice = SessionRecord::from_json(&serde_json::to_vec(&once).unwrap()).unwrap();
        assert_eq!(once, record);
        assert_eq!(twice, record);
    }
}
