//! Property: any bytes read as a stored event or session head give a value or a typed error,
//! never a panic; what decodes re-encodes to the same value and folds without a panic; a head
//! with a newer `schema_version` is refused as newer. The property-test half of the
//! `event_decoding` fuzz target (see `docs/fuzzing.md`).

use proptest::prelude::*;
use serde_json::{json, Value};
use turnstile::fuzzing::{check_event_json, check_record_json};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

/// JSON values with the awkward parts: big and negative numbers, floats, nesting, odd keys.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn kind() -> impl Strategy<Value = Value> {
    prop_oneof![
        (
            ".{0,10}",
            prop::sample::select(vec!["answered", "superseded", "merged", "bogus"])
        )
            .prop_map(|(text, d)| json!({"type": "user_input", "text": text, "disposition": d})),
        (
            ".{0,10}",
            any::<u64>(),
            prop::sample::select(vec!["requested", "deadline", "shutdown"])
        )
            .prop_map(
                |(text, ms, reason)| json!({"type": "agent_output", "text": text,
                "status": {"status": "interrupted", "reason": reason}, "duration_ms": ms,
                "usage": {"input_tokens": ms, "output_tokens": ms}})
            ),
        (".{0,6}", json_value()).prop_map(|(id, args)| json!({"type": "tool_call",
            "call_id": id, "name": "t", "arguments": args})),
        (any::<u64>(), ".{0,10}").prop_map(|(through, text)| json!({"type": "summary",
            "text": text, "through_seq": through})),
        Just(json!({"type": "context_cleared"})),
    ]
}

/// A stored event, valid in shape, with extreme numbers, extra fields and deltas.
fn event() -> impl Strategy<Value = Value> {
    (
        any::<u64>(),
        any::<u64>(),
        kind(),
        prop::option::of(prop::collection::btree_map(
            "(user:|app:)?[a-z]{0,4}",
            json_value(),
            0..3,
        )),
        prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..2),
    )
        .prop_map(|(seq, at, kind, delta, extra)| {
            let mut event = json!({"seq": seq, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                "author": "agent", "at_ms": at, "kind": kind});
            if let Some(delta) = delta {
                event["state_delta"] = json!(delta);
            }
            for (k, v) in extra {
                event.as_object_mut().unwrap().entry(k).or_insert(v);
            }
            event
        })
}

/// A stored head, valid in shape, with any schema version and extreme numbers.
fn head() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            Just(json!(1)),
            Just(json!(0)),
            any::<u64>().prop_map(Value::from),
            json_value()
        ],
        any::<u64>(),
        any::<u64>(),
        prop::collection::btree_map("[a-z]{0,4}", json_value(), 0..3),
        prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..2),
    )
        .prop_map(|(schema, version, next_seq, state, extra)| {
            let mut head = json!({"schema_version": schema, "key": "u/s", "version": version,
                "next_seq": next_seq, "created_ms": 1, "updated_ms": version,
                "state": state, "stats": {"events": next_seq}});
            for (k, v) in extra {
                head.as_object_mut().unwrap().entry(k).or_insert(v);
            }
            head
        })
}

/// Bytes of a valid document with a few bytes overwritten and the end cut somewhere.
fn perturbed(doc: Value, edits: Vec<(usize, u8)>, cut: usize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(&doc).unwrap();
    for (at, byte) in edits {
        let at = at % bytes.len();
        bytes[at] = byte;
    }
    let cut = bytes.len() - cut % (bytes.len() / 4 + 1);
    bytes.truncate(cut);
    bytes
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_events_round_trip(event in event()) {
        check_event_json(&serde_json::to_vec(&event).unwrap());
    }

    #[test]
    fn perturbed_events_decode_or_are_refused(
        event in event(), edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cut in any::<usize>(),
    ) {
        check_event_json(&perturbed(event, edits, cut));
    }

    #[test]
    fn heads_round_trip_or_are_refused(
        head in head(), edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..2),
        cut in any::<usize>(),
    ) {
        check_record_json(&serde_json::to_vec(&head).unwrap());
        check_record_json(&perturbed(head, edits, cut));
    }

    #[test]
    fn raw_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_event_json(&bytes);
        check_record_json(&bytes);
    }
}
