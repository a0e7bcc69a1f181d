//! Turning rows into the state model, and driver errors into store errors.

use crate::key::SessionKey;
use crate::state::{Event, SchemaError, SessionRecord, StateDelta, StateMap};
use crate::store::StoreError;

pub(super) fn corrupt(key: &SessionKey, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        detail: format!("postgres: {detail}"),
    }
}

/// A session's head as stored: the record and the epoch of this incarnation of the session.
#[derive(Debug, Clone)]
pub(super) struct StoredHead {
    /// The record.
    pub record: SessionRecord,
    /// Random per creation of the session: a session deleted and created again reaches the same
    /// versions, and the epoch tells the two apart.
    pub epoch: i64,
}

/// Reads a head row back, checking that its columns agree with its record.
pub(super) fn decode_head(
    key: &SessionKey,
    version: i64,
    epoch: i64,
    record: &str,
) -> Result<StoredHead, StoreError> {
    let record = SessionRecord::from_json(record.as_bytes()).map_err(|e| match e {
        SchemaError::Corrupt(e) => corrupt(key, e),
        source => StoreError::Schema {
            key: key.clone(),
            source,
        },
    })?;
    if u64::try_from(version) != Ok(record.version) || record.key != *key {
        return Err(corrupt(
            key,
            "the head's version or key disagrees with its record",
        ));
    }
    Ok(StoredHead { record, epoch })
}

pub(super) fn decode_events(key: &SessionKey, raw: &[String]) -> Result<Vec<Event>, StoreError> {
    raw.iter()
        .map(|body| serde_json::from_str(body).map_err(|e| corrupt(key, format!("event: {e}"))))
        .collect()
}

pub(super) fn decode_state(key: &SessionKey, raw: Option<&str>) -> Result<StateMap, StoreError> {
    match raw {
        None => Ok(StateMap::new()),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| corrupt(key, format!("shared state is not a JSON object: {e}"))),
    }
}

/// A delta as the append statement takes it: the keys it sets as one JSON object, and the keys
/// it removes (`null` values).
pub(super) fn split_removals(delta: &StateDelta) -> (String, Vec<&str>) {
    let mut sets = serde_json::Map::new();
    let mut removed = Vec::new();
    for (key, value) in delta {
        if value.is_null() {
            removed.push(key.as_str());
        } else {
            sets.insert(key.clone(), value.clone());
        }
    }
    (serde_json::Value::Object(sets).to_string(), removed)
}

/// `n` as a PostgreSQL `bigint`, saturating (limits and sequence numbers beyond it mean "all").
pub(super) fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_become_removals_and_the_rest_one_object() {
        let delta: StateDelta = [
            ("a".to_owned(), json!(1)),
            ("b".to_owned(), serde_json::Value::Null),
            ("c".to_owned(), json!({"x": "'; DROP"})),
        ]
        .into();
        let (sets, removed) = split_removals(&delta);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&sets).unwrap(),
            json!({"a": 1, "c": {"x": "'; DROP"}})
        );
        assert_eq!(removed, ["b"]);
    }
}
