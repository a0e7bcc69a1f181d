//! A registry of declared state keys: each key's name (with its scope prefix), JSON type,
//! default and description, and what the runtime does with a turn whose delta writes a key that
//! is not declared or has the wrong type ([`Mode`]).
//!
//! Pure: no I/O but [`StateKeys::load`], which reads one file. See `docs/runtime-semantics.md`
//! ("Declared state keys").

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::Value;

use crate::state::{Scope, StateDelta};

mod file;

/// What the runtime does with an undeclared or mistyped write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Nothing is checked (as without a registry); defaults still apply.
    #[default]
    Off,
    /// The write is stored, logged and counted ([`StateKeys::violations`] and the
    /// `turnstile_state_key_violations_total` metric).
    Warn,
    /// The turn fails with `AgentFailed` naming the key: its input and a `turn_failed` event
    /// are stored, none of its output or state writes.
    Strict,
}

impl Mode {
    /// The mode's name, as a registry file spells it (`mode = "strict"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Warn => "warn",
            Self::Strict => "strict",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = crate::parse::ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "off" => Ok(Self::Off),
            "warn" => Ok(Self::Warn),
            "strict" => Ok(Self::Strict),
            other => Err(crate::parse::ParseError::new(
                "state key mode",
                other,
                "off, warn or strict",
            )),
        }
    }
}

/// The JSON type a declared key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyType {
    /// A JSON string.
    String,
    /// Any JSON number.
    Number,
    /// A JSON number without a fraction.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
    /// Any JSON value.
    Any,
}

impl KeyType {
    /// Whether `value` has this type.
    pub fn admits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Boolean => value.is_boolean(),
            Self::Object => value.is_object(),
            Self::Array => value.is_array(),
            Self::Any => true,
        }
    }

    /// The type's name as written in a registry file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Object => "object",
            Self::Array => "array",
            Self::Any => "any",
        }
    }
}

/// One declared key.
#[derive(Debug, Clone, PartialEq)]
pub struct StateKey {
    /// The full name with its scope prefix (`user:name`, `app:plan`, `topic`).
    pub name: String,
    /// The JSON type it holds.
    pub ty: KeyType,
    /// What it reads as while unset.
    pub default: Option<Value>,
    /// What it means, for people and tools.
    pub description: String,
    /// Whether a user token may set it on its own sessions over HTTP
    /// (`POST /v1/sessions/{user}/{session}/state`); admins may set any session key.
    pub editable: bool,
}

impl StateKey {
    /// A key of type `ty` with no default and no description.
    pub fn new(name: impl Into<String>, ty: KeyType) -> Self {
        Self {
            name: name.into(),
            ty,
            default: None,
            description: String::new(),
            editable: false,
        }
    }

    /// Sets the default.
    pub fn with_default(mut self, default: impl Into<Value>) -> Self {
        self.default = Some(default.into());
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Lets user tokens set it on their own sessions over HTTP.
    pub fn editable(mut self) -> Self {
        self.editable = true;
        self
    }
}

/// A write that breaks the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The key is not declared.
    Undeclared {
        /// The key.
        key: String,
    },
    /// The value is not of the declared type.
    WrongType {
        /// The key.
        key: String,
        /// The declared type.
        expected: KeyType,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undeclared { key } => write!(f, "state key {key:?} is not declared"),
            Self::WrongType { key, expected } => write!(
                f,
                "state key {key:?} must hold a {} value",
                expected.as_str()
            ),
        }
    }
}

/// Why a registry was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateKeysError {
    /// A declaration is not valid (a `temp:` key, a default of the wrong type).
    #[error("state key {key:?}: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The registry file could not be read or parsed; the message names the line and field.
    #[error("state key registry {path}: {detail}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong, where (line, column, field).
        detail: String,
    },
}

/// The declared state keys and the [`Mode`] that enforces them.
///
/// Keys of every scope may be declared; `temp:` keys are never persisted and may not be.
#[derive(Debug, Default)]
pub struct StateKeys {
    keys: BTreeMap<String, StateKey>,
    mode: Mode,
    /// Undeclared or mistyped writes seen in `warn` and `strict` modes.
    violations: AtomicU64,
}

impl StateKeys {
    /// An empty registry in `mode`.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Adds a declaration; refuses `temp:` keys, a default of the wrong type and an editable
    /// key of a shared scope.
    pub fn declare(mut self, key: StateKey) -> Result<Self, StateKeysError> {
        let invalid = |reason: &str| StateKeysError::InvalidKey {
            key: key.name.clone(),
            reason: reason.to_owned(),
        };
        if key.name.is_empty() {
            return Err(invalid("the name is empty"));
        }
        match Scope::split(&key.name) {
            (Scope::Temp, _) => {
                return Err(invalid(
                    "`temp:` keys are never stored and cannot be declared",
                ))
            }
            (_, "") => return Err(invalid("the name has a scope prefix and nothing after it")),
            (Scope::User | Scope::App, _) if key.editable => {
                return Err(invalid(
                    "only session keys can be editable: `user:` and `app:` keys are shared by \
                     other sessions",
                ))
            }
            _ => {}
        }
        if let Some(default) = &key.default {
            if !key.ty.admits(default) {
                return Err(invalid(&format!(
                    "the default {default} is not a {} value",
                    key.ty.as_str()
                )));
            }
        }
        self.keys.insert(key.name.clone(), key);
        Ok(self)
    }

    /// The same registry in another mode.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Reads a registry from a `.toml` or `.json` file (by its extension; anything else is read
    /// as JSON). Errors name the file, the line and the field.
    pub fn load(path: &Path) -> Result<Self, StateKeysError> {
        file::load(path)
    }

    /// Parses a registry in TOML; `path` is only named in errors.
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, StateKeysError> {
        file::from_toml(text, path)
    }

    /// Parses a registry in JSON; `path` is only named in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, StateKeysError> {
        file::from_json(text, path)
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// A declared key.
    pub fn get(&self, name: &str) -> Option<&StateKey> {
        self.keys.get(name)
    }

    /// Every declared key, ordered by name.
    pub fn keys(&self) -> impl Iterator<Item = &StateKey> {
        self.keys.values()
    }

    /// The default of a declared key.
    pub fn default_of(&self, name: &str) -> Option<&Value> {
        self.keys.get(name)?.default.as_ref()
    }

    /// The writes of `delta` that break the registry (deleting a declared key is fine; `temp:`
    /// keys are never checked). Empty in `off` mode.
    pub fn check(&self, delta: &StateDelta) -> Vec<Violation> {
        if self.mode == Mode::Off {
            return Vec::new();
        }
        let mut found = Vec::new();
        for (key, value) in delta {
            if matches!(Scope::split(key).0, Scope::Temp) {
                continue;
            }
            match self.keys.get(key) {
                None => found.push(Violation::Undeclared { key: key.clone() }),
                Some(declared) if !value.is_null() && !declared.ty.admits(value) => {
                    found.push(Violation::WrongType {
                        key: key.clone(),
                        expected: declared.ty,
                    });
                }
                Some(_) => {}
            }
        }
        self.count(found.len());
        found
    }

    /// Undeclared or mistyped writes seen so far (`warn` and `strict` modes).
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::Relaxed)
    }

    fn count(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.violations.fetch_add(n as u64, Ordering::Relaxed);
        let mode = match self.mode {
            Mode::Strict => "strict",
            _ => "warn",
        };
        metrics::counter!("turnstile_state_key_violations_total", "mode" => mode)
            .increment(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn registry(mode: Mode) -> StateKeys {
        StateKeys::new(mode)
            .declare(StateKey::new("user:name", KeyType::String).with_default("friend"))
            .unwrap()
            .declare(StateKey::new("count", KeyType::Integer))
            .unwrap()
    }

    #[test]
    fn only_session_keys_may_be_editable() {
        assert!(StateKeys::new(Mode::Off)
            .declare(StateKey::new("tone", KeyType::String).editable())
            .is_ok_and(|keys| keys.get("tone").is_some_and(|k| k.editable)));
        for shared in ["user:name", "app:plan"] {
            let refused = StateKeys::new(Mode::Off)
                .declare(StateKey::new(shared, KeyType::String).editable())
                .unwrap_err();
            assert!(
                refused.to_string().contains("only session keys"),
                "{refused}"
            );
        }
    }

    #[test]
    fn undeclared_and_mistyped_writes_are_found_and_temp_keys_are_not() {
        let keys = registry(Mode::Warn);
        let delta: StateDelta = [
            ("user:name".to_owned(), json!(5)),
            ("count".to_owned(), json!(null)),
            ("typo".to_owned(), json!(1)),
            ("temp:x".to_owned(), json!(1)),
        ]
        .into();
        let found = keys.check(&delta);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(keys.violations(), 2);
        assert!(registry(Mode::Off).check(&delta).is_empty());
    }

    #[test]
    fn a_default_of_the_wrong_type_and_temp_keys_are_refused() {
        let bad = StateKeys::new(Mode::Strict)
            .declare(StateKey::new("n", KeyType::Integer).with_default("x"));
        assert!(matches!(bad, Err(StateKeysError::InvalidKey { .. })));
        let temp = StateKeys::new(Mode::Strict).declare(StateKey::new("temp:x", KeyType::Any));
        assert!(temp.is_err());
    }
}
