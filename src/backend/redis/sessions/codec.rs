//! Turning Redis replies into the state model, and Redis errors into store errors.

use std::collections::HashMap;
use std::sync::Arc;

use super::keys::SessionKeys;
use crate::key::SessionKey;
use crate::state::{Event, SchemaError, Seq, SessionRecord, StateDelta, StateMap};
use crate::store::StoreError;

pub(super) fn corrupt(key: &SessionKey, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        detail: format!("redis: {detail}"),
    }
}

/// A session's head as stored, with what this process knows about its follow-up writes.
#[derive(Debug, Clone)]
pub(super) struct StoredHead {
    /// The record: the checkpoint with the events since folded in, at the stored version.
    pub record: SessionRecord,
    /// Random per creation of the session (see `append.lua`).
    pub epoch: String,
    /// The `next_seq` of the stored checkpoint: events from here on are folded on load.
    pub checkpoint_seq: Seq,
    /// Whether this process has written the session's index entries since it last read the
    /// head (see `docs/stores.md`, "After the commit").
    pub indexed: bool,
    /// The session's key names, once an append has made them: kept with the cached head, so
    /// that a session's appends hash and format them once, not on every turn.
    pub names: Option<Arc<SessionKeys>>,
}

/// Rebuilds a head from its hash fields as `load.lua` reads them (version, epoch, next_seq,
/// checkpoint) and the log's newest events, which
/// must include every event after the checkpoint. Checks that they agree with each other.
pub(super) fn decode_head(
    key: &SessionKey,
    fields: Vec<Option<String>>,
    tail: &[Event],
) -> Result<Option<StoredHead>, StoreError> {
    let [version, epoch, next_seq, record]: [Option<String>; 4] = fields
        .try_into()
        .map_err(|_| corrupt(key, "the head reply has the wrong shape"))?;
    let (version, epoch, next_seq, record) = match (version, epoch, next_seq, record) {
        (None, None, None, None) => return Ok(None),
        (Some(v), Some(e), Some(n), Some(r)) => (v, e, n, r),
        _ => return Err(corrupt(key, "the head lacks some of its fields")),
    };
    let mut record = SessionRecord::from_json(record.as_bytes()).map_err(|e| match e {
        SchemaError::Corrupt(e) => corrupt(key, e),
        source => StoreError::Schema {
            key: key.clone(),
            source,
        },
    })?;
    let number = |text: &str, what: &str| {
        text.parse::<u64>()
            .map_err(|_| corrupt(key, format!("the head's {what} {text:?} is not a number")))
    };
    let version = number(&version, "version")?;
    let next_seq = number(&next_seq, "next_seq")?;
    if record.key != *key || record.version > version {
        return Err(corrupt(
            key,
            "the head's version or key disagrees with its record",
        ));
    }
    let checkpoint_seq = record.next_seq;
    if checkpoint_seq < next_seq && tail.first().is_none_or(|e| e.seq > checkpoint_seq) {
        return Err(corrupt(key, "the log lacks events the head needs"));
    }
    for event in tail.iter().filter(|e| e.seq >= checkpoint_seq) {
        record.apply(event);
    }
    if record.next_seq != next_seq {
        return Err(corrupt(
            key,
            "the log's newest events do not match the head",
        ));
    }
    record.version = version;
    Ok(Some(StoredHead {
        record,
        epoch,
        checkpoint_seq,
        indexed: false,
        names: None,
    }))
}

pub(super) fn decode_events(key: &SessionKey, raw: Vec<String>) -> Result<Vec<Event>, StoreError> {
    raw.iter()
        .map(|line| serde_json::from_str(line).map_err(|e| corrupt(key, format!("event: {e}"))))
        .collect()
}

pub(super) fn decode_state(
    about: &SessionKey,
    raw: HashMap<String, String>,
) -> Result<StateMap, StoreError> {
    raw.into_iter()
        .map(|(k, v)| {
            let value = serde_json::from_str(&v)
                .map_err(|e| corrupt(about, format!("shared state {k:?}: {e}")))?;
            Ok((k, value))
        })
        .collect()
}

/// The commands that merge `delta` into the hash `target` (a `null` value deletes its field),
/// as one pipeline on the hash's slot; `None` for an empty delta.
pub(super) fn delta_pipeline(target: &str, delta: &StateDelta) -> Option<redis::Pipeline> {
    if delta.is_empty() {
        return None;
    }
    let mut set = redis::cmd("HSET");
    set.arg(target);
    let mut del = redis::cmd("HDEL");
    del.arg(target);
    let (mut sets, mut dels) = (0, 0);
    for (field, value) in delta {
        if value.is_null() {
            del.arg(field);
            dels += 1;
        } else {
            set.arg(field).arg(value.to_string());
            sets += 1;
        }
    }
    let mut pipe = redis::pipe();
    if sets > 0 {
        pipe.add_command(set).ignore();
    }
    if dels > 0 {
        pipe.add_command(del).ignore();
    }
    Some(pipe)
}
