//! `POST /v1/sessions/{user}/{session}/state`: sets or deletes session state keys without
//! running a turn. The change is one event (a note saying who made it, carrying the state
//! delta) appended through the session's FIFO, so it lands between turns, never inside one, and
//! the log keeps who changed what.
//!
//! `GET /v1/state-keys` lists the declared keys, so that a client (the inspector) can tell
//! which it may set.
//!
//! Who may set what: an admin token, any session key (declared keys must get a value of their
//! type; undeclared ones are refused when the registry is `strict`); a user token, on its own
//! sessions, only keys declared `editable`. `user:` and `app:` keys are shared by other
//! sessions and are not set here; `temp:` keys live for one turn.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::{session_key, Caller};
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::gateway::Gateway;
use super::schema::{Refusals, SessionPath};
use crate::state::{Scope, StateDelta};
use crate::state_keys::{Mode, StateKeys};
use crate::Entry;

/// Most keys one request sets.
pub const MAX_STATE_EDIT_KEYS: usize = 64;

/// Longest key name set, in bytes.
pub const MAX_STATE_KEY_BYTES: usize = 256;

/// `POST …/state`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateEditBody {
    /// Session keys (no scope prefix) to their new values; `null` deletes a key. 1 to 64 keys,
    /// the whole at most the runtime's largest message.
    #[schema(value_type = Object)]
    set: StateDelta,
}

/// `POST …/state`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StateEdited {
    /// The seq of the event that carries the change.
    seq: u64,
    /// The session keys after the change (declared defaults shown for unset keys).
    #[schema(value_type = Object)]
    state: crate::state::StateMap,
}

/// Sets session state keys through the session's FIFO: an admin any key, a user token the keys
/// declared `editable` on its own sessions.
#[utoipa::path(post, path = "/v1/sessions/{user}/{session}/state", tag = "sessions",
    params(SessionPath), request_body = StateEditBody,
    responses((status = 200, body = StateEdited), Refusals))]
pub(crate) async fn edit_state(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<StateEditBody>,
) -> Result<Json<StateEdited>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    let max_bytes = runtime.config().max_input_bytes;
    check_edit(
        &body.set,
        runtime.state_keys().map(AsRef::as_ref),
        caller.is_admin(),
        max_bytes,
    )?;
    // Appending goes through the session, which would create an empty one: check it exists.
    if runtime.state(&key).await?.is_none() {
        return Err(ApiError::NotFound(format!("no session {key}")));
    }
    let who = if caller.is_admin() {
        "an admin"
    } else {
        "its user"
    };
    let names: Vec<&str> = body.set.keys().map(String::as_str).collect();
    let note = Entry::Note(format!("state set by {who}: {}", names.join(", ")));
    let seq = runtime
        .append_between_turns(&key, vec![note], body.set)
        .await?;
    let view = runtime
        .state(&key)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no session {key}")))?;
    Ok(Json(StateEdited {
        seq,
        state: view.record.state,
    }))
}

/// One declared state key, as `GET /v1/state-keys` lists it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeclaredKey {
    /// The full name with its scope prefix (`user:name`, `app:plan`, `topic`).
    name: String,
    /// `string`, `number`, `integer`, `boolean`, `array`, `object` or `any`.
    #[serde(rename = "type")]
    ty: &'static str,
    /// What it reads as while unset; `null` when it has no default.
    #[schema(value_type = Option<Object>)]
    default: Option<Value>,
    /// What it means.
    description: String,
    /// Whether a user token may set it on its own sessions (`POST …/state`).
    editable: bool,
}

/// `GET /v1/state-keys`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeclaredKeys {
    /// What the runtime does with undeclared or mistyped writes (`off`, `warn`, `strict`);
    /// `null` when the server has no registry.
    mode: Option<&'static str>,
    /// The declared keys, by name.
    keys: Vec<DeclaredKey>,
}

/// The state keys the server declares (`--state-keys`): their types, defaults, descriptions
/// and which a user token may set. Any valid token reads them.
#[utoipa::path(get, path = "/v1/state-keys", tag = "sessions",
    responses((status = 200, body = DeclaredKeys), Refusals))]
pub(crate) async fn list_state_keys(
    State(gateway): State<Gateway>,
    _caller: Caller,
) -> Json<DeclaredKeys> {
    let Some(registry) = gateway.runtime().state_keys() else {
        return Json(DeclaredKeys {
            mode: None,
            keys: Vec::new(),
        });
    };
    let mut keys: Vec<DeclaredKey> = registry
        .keys()
        .map(|key| DeclaredKey {
            name: key.name.clone(),
            ty: key.ty.as_str(),
            default: key.default.clone(),
            description: key.description.clone(),
            editable: key.editable,
        })
        .collect();
    keys.sort_by(|a, b| a.name.cmp(&b.name));
    Json(DeclaredKeys {
        mode: Some(registry.mode().as_str()),
        keys,
    })
}

/// Refuses an edit that is empty or too large, names a key of another scope or an invalid
/// name, gives a declared key a value of another type, or (for a user token) sets a key not
/// declared editable.
fn check_edit(
    set: &StateDelta,
    keys: Option<&StateKeys>,
    admin: bool,
    max_bytes: usize,
) -> Result<(), ApiError> {
    if set.is_empty() || set.len() > MAX_STATE_EDIT_KEYS {
        return Err(ApiError::BadRequest(format!(
            "set holds {} keys; 1 to {MAX_STATE_EDIT_KEYS} may be set at once",
            set.len()
        )));
    }
    let size = serde_json::to_vec(set).map_or(usize::MAX, |bytes| bytes.len());
    if size > max_bytes {
        return Err(ApiError::BadRequest(format!(
            "set is {size} bytes of JSON; at most {max_bytes} (the largest message) are taken"
        )));
    }
    for (name, value) in set {
        check_key(name, value, keys, admin)?;
    }
    Ok(())
}

fn check_key(
    name: &str,
    value: &Value,
    keys: Option<&StateKeys>,
    admin: bool,
) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > MAX_STATE_KEY_BYTES || name.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "state key names are 1 to {MAX_STATE_KEY_BYTES} bytes without control characters"
        )));
    }
    if Scope::split(name).0 != Scope::Session {
        return Err(ApiError::BadRequest(format!(
            "{name:?} has a scope prefix: only session keys are set here (`user:` and `app:` \
             keys are shared by other sessions, `temp:` keys last one turn)"
        )));
    }
    let declared = keys.and_then(|keys| keys.get(name));
    match declared {
        Some(declared) if !value.is_null() && !declared.ty.admits(value) => {
            Err(ApiError::BadRequest(format!(
                "state key {name:?} holds {} values",
                declared.ty.as_str()
            )))
        }
        Some(declared) if !admin && !declared.editable => Err(ApiError::Forbidden(format!(
            "state key {name:?} is not declared editable: only an admin token may set it"
        ))),
        Some(_) => Ok(()),
        None if !admin => Err(ApiError::Forbidden(format!(
            "state key {name:?} is not declared editable: only an admin token may set it"
        ))),
        None if keys.is_some_and(|keys| keys.mode() == Mode::Strict) => Err(ApiError::BadRequest(
            format!("state key {name:?} is not declared, and the registry is strict"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state_keys::{KeyType, StateKey};

    fn delta(pairs: Value) -> StateDelta {
        serde_json::from_value(pairs).unwrap()
    }

    fn registry(mode: Mode) -> StateKeys {
        StateKeys::new(mode)
            .declare(StateKey::new("tone", KeyType::String).editable())
            .unwrap()
            .declare(StateKey::new("plan", KeyType::String))
            .unwrap()
    }

    fn refusal(set: Value, keys: Option<&StateKeys>, admin: bool) -> String {
        check_edit(&delta(set), keys, admin, 1024)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn admins_set_any_session_key_of_the_right_type() {
        let strict = registry(Mode::Strict);
        let off = registry(Mode::Off);
        assert_eq!(
            refusal(json!({"plan": "pro", "tone": null}), Some(&strict), true),
            ""
        );
        assert_eq!(refusal(json!({"anything": [1]}), None, true), "");
        assert_eq!(refusal(json!({"anything": [1]}), Some(&off), true), "");
        assert!(refusal(json!({"anything": 1}), Some(&strict), true).contains("strict"));
        assert!(refusal(json!({"plan": 3}), Some(&off), true).contains("string"));
    }

    #[test]
    fn user_tokens_set_only_keys_declared_editable() {
        let keys = registry(Mode::Off);
        assert_eq!(refusal(json!({"tone": "warm"}), Some(&keys), false), "");
        assert!(refusal(json!({"plan": "pro"}), Some(&keys), false).contains("editable"));
        assert!(refusal(json!({"x": 1}), Some(&keys), false).contains("editable"));
        assert!(refusal(json!({"x": 1}), None, false).contains("editable"));
    }

    #[test]
    fn shared_scopes_bad_names_and_sizes_are_refused() {
        for set in [
            json!({"user:name": "x"}),
            json!({"app:plan": "x"}),
            json!({"temp:x": 1}),
            json!({"": 1}),
            json!({"a\u{7}b": 1}),
            json!({}),
            json!({"big": "x".repeat(2000)}),
        ] {
            assert!(!refusal(set.clone(), None, true).is_empty(), "{set}");
        }
        let many: serde_json::Map<String, Value> = (0..=MAX_STATE_EDIT_KEYS)
            .map(|i| (format!("k{i}"), json!(1)))
            .collect();
        assert!(check_edit(&delta(Value::Object(many)), None, true, usize::MAX).is_err());
    }
}
