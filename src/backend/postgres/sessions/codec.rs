//! Turning rows into the state model, and driver errors into store errors.

use super::SslMode;
use crate::key::SessionKey;
use crate::state::{Event, SchemaError, SessionRecord, StateDelta, StateMap};
use crate::store::StoreError;

pub(crate) fn unavailable(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        backend: "postgres",
        detail: detail.to_string(),
    }
}

/// Maps a driver error. Everything the server or the network says is `Unavailable`: a lost
/// connection, a server shutting down, a deadlock or a timeout — the call did not (or may not)
/// take effect, and a retry after reloading is the remedy.
pub(crate) fn pg_error(about: &str, e: tokio_postgres::Error) -> StoreError {
    let detail = match e.as_db_error() {
        Some(db) if connection_lost(&e) => {
            format!(
                "{about}: the server dropped the connection: {} ({}); the pool opens a new one",
                db.message(),
                db.code().code()
            )
        }
        Some(db) => format!("{about}: {} ({})", db.message(), db.code().code()),
        None if e.is_closed() => format!("{about}: the connection was closed ({e})"),
        // The driver's own message ("error connecting to server") leaves the cause to its source.
        None => match std::error::Error::source(&e) {
            Some(cause) => format!("{about}: {e}: {cause}"),
            None => format!("{about}: {e}"),
        },
    };
    unavailable(detail)
}

/// Whether `e` means the connection is gone: closed under the client, or the server ending it
/// (SQLSTATE class 57P: shutdown, restart, terminated; class 08: connection exceptions).
pub(super) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.as_db_error().is_some_and(|db| {
            let code = db.code().code();
            code.starts_with("57P") || code.starts_with("08")
        })
}

/// Maps a pool error (no connection within the timeout, or the connection attempt failed); a
/// failed TLS handshake under `ssl_mode` says what to change.
pub(super) fn pool_error(e: deadpool_postgres::PoolError, ssl_mode: SslMode) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => match super::tls::hint(ssl_mode, &e) {
            Some(hint) => match pg_error("connecting", e) {
                StoreError::Unavailable { backend, detail } => StoreError::Unavailable {
                    backend,
                    detail: format!("{detail}; {hint}"),
                },
                other => other,
            },
            None => pg_error("connecting", e),
        },
        other => unavailable(format!("no connection: {other}")),
    }
}

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
