//! Turning Redis replies into the state model, and Redis errors into store errors.

use std::collections::HashMap;

use redis::RedisError;

use crate::key::SessionKey;
use crate::state::{Event, SchemaError, SessionRecord, StateDelta, StateMap};
use crate::store::StoreError;

pub(super) fn unavailable(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        backend: "redis",
        detail: detail.to_string(),
    }
}

/// Maps a Redis error: the server's or the network's trouble is `Unavailable`; a reply of the
/// wrong shape means a key holds data this store did not write, which is `Corrupt`.
pub(super) fn redis_error(about: &str, e: RedisError) -> StoreError {
    let wrong_data = matches!(
        e.kind(),
        redis::ErrorKind::UnexpectedReturnType | redis::ErrorKind::Parse
    ) || e.code() == Some("WRONGTYPE");
    if wrong_data {
        StoreError::Corrupt {
            key: about.to_owned(),
            detail: format!("redis: {e}"),
        }
    } else {
        unavailable(e)
    }
}

pub(super) fn corrupt(key: &SessionKey, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        detail: format!("redis: {detail}"),
    }
}

/// A session's head as stored: the record and the epoch of this incarnation of the session.
#[derive(Debug, Clone)]
pub(super) struct StoredHead {
    /// The record.
    pub record: SessionRecord,
    /// Random per creation of the session (see `append.lua`).
    pub epoch: String,
}

/// Reads a head hash's fields (`v`, `r`, `e`) back, checking they agree with each other.
pub(super) fn decode_head(
    key: &SessionKey,
    fields: (Option<String>, Option<String>, Option<String>),
) -> Result<Option<StoredHead>, StoreError> {
    let (version, record, epoch) = match fields {
        (None, None, None) => return Ok(None),
        (Some(v), Some(r), Some(e)) => (v, r, e),
        _ => return Err(corrupt(key, "the head lacks some of its fields")),
    };
    let record = SessionRecord::from_json(record.as_bytes()).map_err(|e| match e {
        SchemaError::Corrupt(e) => corrupt(key, e),
        source => StoreError::Schema {
            key: key.clone(),
            source,
        },
    })?;
    if version.parse() != Ok(record.version) || record.key != *key {
        return Err(corrupt(
            key,
            "the head's version or key disagrees with its record",
        ));
    }
    Ok(Some(StoredHead { record, epoch }))
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

/// Appends a delta to a script call as a count and field/value pairs (`""` deletes).
pub(super) fn push_delta(call: &mut redis::ScriptInvocation<'_>, delta: &StateDelta) {
    call.arg(delta.len());
    for (field, value) in delta {
        let text = if value.is_null() {
            String::new()
        } else {
            value.to_string()
        };
        call.arg(field).arg(text);
    }
}
