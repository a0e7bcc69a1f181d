//! `sessions show --state-keys FILE`: the session's state, user state and app state, each key
//! labelled with what the registry declares of it (type and description), as undeclared, or as
//! holding the wrong type; declared keys that are unset are shown with their default.

use serde_json::{json, Value};
use turnstile::state::StateMap;
use turnstile::state_keys::StateKeys;
use turnstile::store::LoadedSession;

use super::format::clip;

/// One key as `show` reports it.
struct Row {
    key: String,
    value: Option<Value>,
    label: String,
}

fn rows(keys: &StateKeys, loaded: &LoadedSession, session: &StateMap) -> Vec<Row> {
    let scoped = [
        ("", session),
        ("user:", &loaded.user_state),
        ("app:", &loaded.app_state),
    ];
    let mut rows = Vec::new();
    for (prefix, map) in scoped {
        for (plain, value) in map {
            let key = format!("{prefix}{plain}");
            let label = match keys.get(&key) {
                None => "UNDECLARED".to_owned(),
                Some(declared) if !declared.ty.admits(value) => {
                    format!("WRONG TYPE (declared {})", declared.ty.as_str())
                }
                Some(declared) => format!("{}: {}", declared.ty.as_str(), declared.description),
            };
            rows.push(Row {
                key,
                value: Some(value.clone()),
                label,
            });
        }
    }
    for declared in keys.keys() {
        if rows.iter().any(|row| row.key == declared.name) {
            continue;
        }
        let label = match &declared.default {
            Some(_) => format!(
                "{}: {} (unset: default)",
                declared.ty.as_str(),
                declared.description
            ),
            None => format!("{}: {} (unset)", declared.ty.as_str(), declared.description),
        };
        rows.push(Row {
            key: declared.name.clone(),
            value: declared.default.clone(),
            label,
        });
    }
    rows
}

/// Prints the labelled state, one key per line.
pub(super) fn print(keys: &StateKeys, loaded: &LoadedSession, session: &StateMap) {
    println!("state keys    (registry mode {:?})", keys.mode());
    for row in rows(keys, loaded, session) {
        let value = row.value.map_or_else(|| "-".to_owned(), |v| v.to_string());
        println!("  {:<24} {:<24} {}", row.key, clip(&value, 24), row.label);
    }
}

/// The labelled state as JSON: `[{"key", "value", "label"}]`.
pub(super) fn to_json(keys: &StateKeys, loaded: &LoadedSession, session: &StateMap) -> Value {
    rows(keys, loaded, session)
        .into_iter()
        .map(|row| json!({ "key": row.key, "value": row.value, "label": row.label }))
        .collect()
}
