//! The state model: a session is an append-only log of [`Event`]s, and its state is the fold of
//! their deltas. Pure and synchronous: no I/O, no tasks.

mod event;
mod record;
mod scope;
mod timing;
mod turn;

pub use event::{
    Author, Event, EventKind, Extra, IncompleteReason, InputDisposition, InterruptReason,
    OutputStatus, Seq, ToolStatus, Usage,
};
pub(crate) use record::FIRST_SCHEMA_VERSION;
pub use record::{
    check_schema, SchemaError, SessionRecord, SessionStats, SummaryRecord, SCHEMA_VERSION,
};
pub use scope::{
    apply_plain, persistable, Scope, ScopedState, SplitDelta, StateDelta, StateMap, APP_PREFIX,
    TEMP_PREFIX, USER_PREFIX,
};
pub use timing::{ModelRequestTiming, TurnTiming};
pub use turn::{
    answer_to, carries_request, ends_turn, find_request, in_failed_turns, open_calls,
    turn_ending_at, Answer, Ending, Fate, NotATurn, RequestRead, ToolCallRead, ToolResultRead,
    Turn,
};
