//! Decoding of events and session heads: a typed result, never a panic; what decodes
//! re-encodes to something that decodes to the same value, and folds without a panic.

use crate::key::SessionKey;
use crate::state::{Event, SchemaError, SessionRecord, SCHEMA_VERSION};

/// `bytes` as one stored event (a log line without its commit marker).
pub fn check_event_json(bytes: &[u8]) {
    let Ok(event) = serde_json::from_slice::<Event>(bytes) else {
        return;
    };
    let again = serde_json::to_vec(&event).expect("a decoded event encodes");
    let back: Event = serde_json::from_slice(&again)
        .unwrap_or_else(|e| panic!("a re-encoded event does not decode: {e}"));
    assert_eq!(back, event, "an event changed on a round trip");
    let key = SessionKey::new("u", "s").expect("a valid key");
    let mut record = SessionRecord::new(key, 0);
    record.apply(&event);
    record.apply(&event);
}

/// `bytes` as a stored session head.
pub fn check_record_json(bytes: &[u8]) {
    let declared = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|value| value.get("schema_version")?.as_u64());
    match SessionRecord::from_json(bytes) {
        Ok(record) => {
            assert!(
                declared.unwrap_or(0) <= u64::from(SCHEMA_VERSION),
                "a newer schema was read"
            );
            let again = serde_json::to_vec(&record).expect("a decoded record encodes");
            let back = SessionRecord::from_json(&again)
                .unwrap_or_else(|e| panic!("a re-encoded record does not decode: {e}"));
            assert_eq!(back, record, "a record changed on a round trip");
        }
        Err(SchemaError::Newer { found, supported }) => {
            assert!(u64::from(found) > u64::from(supported));
            assert!(declared.is_some_and(|v| v > u64::from(SCHEMA_VERSION)));
        }
        Err(SchemaError::Corrupt(_)) => {
            assert!(
                declared.is_none_or(|v| v <= u64::from(SCHEMA_VERSION)),
                "a newer schema must be refused as newer, not as corrupt"
            );
        }
    }
}
