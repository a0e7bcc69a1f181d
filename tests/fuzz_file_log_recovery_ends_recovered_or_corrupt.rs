//! Property: whatever bytes a session's head and log hold, the file store's load ends in a
//! recovered session or `StoreError::Corrupt` (`Schema` for a newer head), never a panic; a
//! recovered session is never older or shorter than its head promises, its window ends at its
//! newest event, and reading the whole log gives every event from 1 or an error. The
//! property-test half of the `file_log_recovery` fuzz target (see `docs/fuzzing.md`).

use proptest::prelude::*;
use turnstile::fuzzing::{check_log_recovery, valid_session, LogFiles};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

/// Which file an edit touches, and how.
#[derive(Debug, Clone)]
enum Edit {
    Overwrite {
        head: bool,
        at: usize,
        byte: u8,
    },
    Cut {
        head: bool,
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    DropHead,
    /// Sets a number in the head (`next_seq`, `version`, `log_bytes`) to a nearby or extreme value.
    HeadNumber {
        field: &'static str,
        value: Number,
    },
}

#[derive(Debug, Clone, Copy)]
enum Number {
    Plus(u64),
    Minus(u64),
    Exactly(u64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<bool>(), any::<usize>(), any::<u8>()).prop_map(|(head, at, byte)| Edit::Overwrite {
            head,
            at,
            byte
        }),
        (any::<bool>(), any::<usize>()).prop_map(|(head, at)| Edit::Cut { head, at }),
        (
            any::<usize>(),
            prop_oneof![
                Just(b"\n".to_vec()),
                Just(b"{\"_v\":9,".to_vec()),
                prop::collection::vec(any::<u8>(), 1..8)
            ]
        )
            .prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        Just(Edit::DropHead),
        (
            prop::sample::select(vec!["next_seq", "version", "log_bytes"]),
            number()
        )
            .prop_map(|(field, value)| Edit::HeadNumber { field, value }),
    ]
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        (1u64..3).prop_map(Number::Plus),
        (1u64..3).prop_map(Number::Minus),
        prop::sample::select(vec![0, 1, u64::MAX - 1, u64::MAX]).prop_map(Number::Exactly),
    ]
}

fn apply(files: &mut LogFiles, edit: Edit) {
    match edit {
        Edit::Overwrite { head, at, byte } => {
            if let Some(bytes) = target(files, head) {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] = byte;
                }
            }
        }
        Edit::Cut { head, at } => {
            if let Some(bytes) = target(files, head) {
                let at = at % (bytes.len() + 1);
                bytes.truncate(at);
            }
        }
        Edit::Insert { at, bytes: more } => {
            if let Some(bytes) = target(files, false) {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, more);
            }
        }
        Edit::DropHead => files.head = None,
        Edit::HeadNumber { field, value } => {
            let Some(head) = files.head.as_mut() else {
                return;
            };
            let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(head) else {
                return;
            };
            let old = json[field].as_u64().unwrap_or(0);
            json[field] = match value {
                Number::Plus(n) => old.saturating_add(n),
                Number::Minus(n) => old.saturating_sub(n),
                Number::Exactly(n) => n,
            }
            .into();
            *head = serde_json::to_vec(&json).unwrap();
        }
    }
}

fn target(files: &mut LogFiles, head: bool) -> Option<&mut Vec<u8>> {
    if head {
        files.head.as_mut()
    } else {
        files.log.as_mut()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_sessions_recover_whole(
        appends in 0u64..5, per in 1u64..3, headed in 0u64..5, window in 0usize..8,
    ) {
        check_log_recovery(&valid_session(appends, per, headed.min(appends)), window);
    }

    #[test]
    fn damaged_sessions_recover_or_are_corrupt(
        appends in 1u64..5, per in 1u64..3, headed in 0u64..5, window in 0usize..8,
        edits in prop::collection::vec(edit(), 1..3),
    ) {
        let mut files = valid_session(appends, per, headed.min(appends));
        for edit in edits {
            apply(&mut files, edit);
        }
        check_log_recovery(&files, window);
    }

    #[test]
    fn raw_bytes_recover_or_are_corrupt(
        head in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        log in prop::option::of(prop::collection::vec(any::<u8>(), 0..128)),
        window in 0usize..4,
    ) {
        check_log_recovery(&LogFiles { head, log }, window);
    }
}
