//! `sessions export` and `sessions import`: one session as one JSON document,
//! `{"schema_version", "key", "record", "events": [...]}`.
//!
//! An import is validated completely before anything is written, and then written with one
//! compare-and-set append based on version 0, so it either creates the whole session or nothing.
//! The store refolds the head from the events: the imported session gets version 1 and the
//! creation time of its first event, and its events' `user:` and `app:` changes are merged into
//! the target store's shared state, as if the turns were replayed there.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnstile::config::MAX_MESSAGE_BYTES;
use turnstile::state::{check_schema, Event, EventKind, SessionRecord, SCHEMA_VERSION};
use turnstile::store::{read_log, LOG_PAGE};
use turnstile::{SessionKey, Store, StoreError};

/// The exported form of one session.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExportDoc {
    /// Version of the persisted form the document was written with.
    pub schema_version: u32,
    /// The session.
    pub key: SessionKey,
    /// Its head, as the store kept it.
    pub record: SessionRecord,
    /// Its whole log, oldest first.
    pub events: Vec<Event>,
}

/// Reads a session and its whole log. `Ok(None)` when it does not exist.
pub async fn export(store: &dyn Store, key: &SessionKey) -> Result<Option<ExportDoc>, String> {
    let read_error = |e: StoreError| format!("cannot read {key}: {e}");
    let Some(record) = store.load(key, 0).await.map_err(read_error)?.record else {
        return Ok(None);
    };
    let want = record.next_seq.saturating_sub(1);
    let events = read_log(store, key, want, LOG_PAGE)
        .await
        .map_err(read_error)?;
    if events.len() as u64 != want {
        return Err(format!(
            "{key} changed while it was exported (its head names {want} events, the log has {}); \
             try again",
            events.len()
        ));
    }
    Ok(Some(ExportDoc {
        schema_version: SCHEMA_VERSION,
        key: key.clone(),
        record,
        events,
    }))
}

/// The largest export document `import` reads. Far beyond any real conversation at the default
/// limits (a window's worth of megabyte inputs is 64 MiB), small enough that a runaway or hostile
/// file cannot exhaust memory before it is refused.
pub const MAX_IMPORT_BYTES: u64 = 256 << 20;

/// Checks a document completely; the error says what is wrong and that nothing was written.
pub fn parse(bytes: &[u8]) -> Result<ExportDoc, String> {
    let refused = |why: String| format!("refused, nothing was written: {why}");
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| refused(format!("not valid JSON ({e})")))?;
    // The schema is checked before the shape, so that a newer document is refused as newer
    // rather than as malformed.
    check_schema(&value).map_err(|e| refused(e.to_string()))?;
    if let Some(record) = value.get("record") {
        check_schema(record).map_err(|e| refused(format!("record: {e}")))?;
    }
    let doc: ExportDoc = serde_json::from_value(value)
        .map_err(|e| refused(format!("not a session export document ({e})")))?;
    if doc.record.key != doc.key {
        return Err(refused(format!(
            "the document is for {} but its record is for {}",
            doc.key, doc.record.key
        )));
    }
    if doc.events.is_empty() {
        return Err(refused("the document has no events".into()));
    }
    for (expected, event) in (1u64..).zip(&doc.events) {
        if event.seq != expected {
            return Err(refused(format!(
                "event sequence numbers must run 1, 2, 3… without gaps; found {} where {expected} \
                 was expected",
                event.seq
            )));
        }
    }
    // What a runtime would have refused at the door is refused here too.
    for event in &doc.events {
        if let EventKind::UserInput { text, .. } = &event.kind {
            if text.len() > MAX_MESSAGE_BYTES {
                return Err(refused(format!(
                    "event {} is an input of {} bytes; a runtime accepts at most {MAX_MESSAGE_BYTES}",
                    event.seq,
                    text.len()
                )));
            }
        }
    }
    let last = doc.events.len() as u64;
    if doc.record.next_seq != last + 1 {
        return Err(refused(format!(
            "the record says the log has {} events but the document holds {last}",
            doc.record.next_seq.saturating_sub(1)
        )));
    }
    Ok(doc)
}

/// Writes a checked document as a new session; refuses if the session exists.
pub async fn import(store: &dyn Store, doc: &ExportDoc) -> Result<u64, String> {
    let key = &doc.key;
    let exists = || {
        format!(
            "refused, nothing was written: {key} already exists in this store; delete it first \
             (turnstile sessions delete {key})"
        )
    };
    let loaded = store
        .load(key, 0)
        .await
        .map_err(|e| format!("cannot read {key}: {e}"))?;
    if loaded.record.is_some() {
        return Err(exists());
    }
    match store.append(key, 0, &doc.events).await {
        Ok(_) => Ok(doc.events.len() as u64),
        Err(StoreError::Conflict { .. }) => Err(exists()),
        Err(e @ StoreError::NotReplicated { .. }) => Err(format!(
            "{key} is written, but not confirmed by the replicas in time (do not import it \
             again; it may be lost only if the primary fails over before they catch up): {e}"
        )),
        Err(e) => Err(format!("import of {key} failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use turnstile::store::conformance::turn_events;

    fn doc() -> Value {
        let key = SessionKey::new("u", "s").unwrap();
        let events = turn_events(1, "hello", None);
        let mut record = SessionRecord::new(key.clone(), 1);
        for e in &events {
            record.apply(e);
        }
        serde_json::to_value(ExportDoc {
            schema_version: SCHEMA_VERSION,
            key,
            record,
            events,
        })
        .unwrap()
    }

    fn refusal(value: &Value) -> String {
        parse(&serde_json::to_vec(value).unwrap()).unwrap_err()
    }

    #[test]
    fn a_valid_document_parses() {
        assert_eq!(
            parse(&serde_json::to_vec(&doc()).unwrap())
                .unwrap()
                .events
                .len(),
            2
        );
    }

    #[test]
    fn bad_documents_are_refused_with_the_reason() {
        assert!(parse(b"{not json").unwrap_err().contains("not valid JSON"));
        let mut newer = doc();
        newer["schema_version"] = json!(SCHEMA_VERSION + 1);
        assert!(refusal(&newer).contains("upgrade turnstile"));
        let mut mismatch = doc();
        mismatch["key"] = json!("u/other");
        assert!(refusal(&mismatch).contains("its record is for u/s"));
        let mut gap = doc();
        gap["events"][1]["seq"] = json!(3);
        assert!(refusal(&gap).contains("without gaps"));
        let mut short = doc();
        short["record"]["next_seq"] = json!(9);
        assert!(refusal(&short).contains("the record says the log has 8 events"));
        for message in [refusal(&newer), refusal(&gap)] {
            assert!(message.contains("nothing was written"));
        }
    }

    /// An import cannot store what a runtime would refuse at the door.
    #[test]
    fn an_input_over_the_runtime_limit_is_refused() {
        let mut big = doc();
        let text = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let input = big["events"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|e| e["kind"]["type"] == "user_input")
            .expect("a turn starts with the user's input");
        input["kind"]["text"] = json!(text);
        let message = refusal(&big);
        assert!(message.contains("a runtime accepts at most"), "{message}");
        assert!(message.contains("nothing was written"), "{message}");
    }
}
