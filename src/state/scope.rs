//! Scoped state: keys by prefix, deltas, and the fold.

use std::collections::BTreeMap;

use serde_json::Value;

/// A set of state values, by key (without the scope prefix for `user:` and `app:` maps).
pub type StateMap = BTreeMap<String, Value>;

/// Changes to scoped state made by one event: full keys (with prefix) to new values, where
/// `null` deletes the key.
pub type StateDelta = BTreeMap<String, Value>;

/// Prefix of keys shared by all sessions of a user.
pub const USER_PREFIX: &str = "user:";
/// Prefix of keys shared by every session of the application.
pub const APP_PREFIX: &str = "app:";
/// Prefix of keys that live for one turn only and are never persisted.
pub const TEMP_PREFIX: &str = "temp:";

/// Where a state key lives, decided by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// No prefix: this session only.
    Session,
    /// `user:`: every session of the same user.
    User,
    /// `app:`: every session.
    App,
    /// `temp:`: this turn only; never persisted.
    Temp,
}

impl Scope {
    /// The scope of a full key and the key without its prefix.
    pub fn split(key: &str) -> (Scope, &str) {
        if let Some(rest) = key.strip_prefix(USER_PREFIX) {
            (Scope::User, rest)
        } else if let Some(rest) = key.strip_prefix(APP_PREFIX) {
            (Scope::App, rest)
        } else if let Some(rest) = key.strip_prefix(TEMP_PREFIX) {
            (Scope::Temp, rest)
        } else {
            (Scope::Session, key)
        }
    }
}

/// The persisted scopes as one session sees them. `temp:` values live in the running turn only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopedState {
    /// Keys without prefix.
    pub session: StateMap,
    /// `user:` keys, stored without their prefix.
    pub user: StateMap,
    /// `app:` keys, stored without their prefix.
    pub app: StateMap,
}

impl ScopedState {
    /// Reads a full key (with prefix). `temp:` keys are never here.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match Scope::split(key) {
            (Scope::Session, k) => self.session.get(k),
            (Scope::User, k) => self.user.get(k),
            (Scope::App, k) => self.app.get(k),
            (Scope::Temp, _) => None,
        }
    }

    /// Applies a delta: sets each key, removing it where the value is `null`. `temp:` keys are
    /// ignored.
    pub fn apply(&mut self, delta: &StateDelta) {
        for (key, value) in delta {
            let (map, k) = match Scope::split(key) {
                (Scope::Session, k) => (&mut self.session, k),
                (Scope::User, k) => (&mut self.user, k),
                (Scope::App, k) => (&mut self.app, k),
                (Scope::Temp, _) => continue,
            };
            set_or_remove(map, k, value);
        }
    }
}

/// Sets `key` to `value` in `map`, or removes it when `value` is `null`.
pub(super) fn set_or_remove(map: &mut StateMap, key: &str, value: &Value) {
    if value.is_null() {
        map.remove(key);
    } else {
        map.insert(key.to_owned(), value.clone());
    }
}

/// Drops `temp:` keys: what remains is what may be persisted.
pub fn persistable(mut delta: StateDelta) -> StateDelta {
    delta.retain(|key, _| Scope::split(key).0 != Scope::Temp);
    delta
}

/// A delta split by where the store keeps it (keys without prefix).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplitDelta {
    /// Session keys.
    pub session: StateDelta,
    /// `user:` keys, prefix removed.
    pub user: StateDelta,
    /// `app:` keys, prefix removed.
    pub app: StateDelta,
}

impl SplitDelta {
    /// Splits a full-key delta by scope, dropping `temp:` keys.
    pub fn from_delta(delta: &StateDelta) -> Self {
        let mut out = Self::default();
        for (key, value) in delta {
            let (map, k) = match Scope::split(key) {
                (Scope::Session, k) => (&mut out.session, k),
                (Scope::User, k) => (&mut out.user, k),
                (Scope::App, k) => (&mut out.app, k),
                (Scope::Temp, _) => continue,
            };
            map.insert(k.to_owned(), value.clone());
        }
        out
    }

    /// Adds a later delta on top of this one (the later value of a key wins).
    pub fn merge(&mut self, later: SplitDelta) {
        self.session.extend(later.session);
        self.user.extend(later.user);
        self.app.extend(later.app);
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.session.is_empty() && self.user.is_empty() && self.app.is_empty()
    }
}

/// Applies a prefix-free delta to one map.
pub fn apply_plain(map: &mut StateMap, delta: &StateDelta) {
    for (key, value) in delta {
        set_or_remove(map, key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delta(pairs: &[(&str, Value)]) -> StateDelta {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn prefixes_choose_the_scope() {
        assert_eq!(Scope::split("topic"), (Scope::Session, "topic"));
        assert_eq!(Scope::split("user:name"), (Scope::User, "name"));
        assert_eq!(Scope::split("app:model"), (Scope::App, "model"));
        assert_eq!(Scope::split("temp:scratch"), (Scope::Temp, "scratch"));
        assert_eq!(Scope::split("users:x"), (Scope::Session, "users:x"));
    }

    #[test]
    fn fold_sets_overwrites_and_deletes_per_scope() {
        let mut state = ScopedState::default();
        state.apply(&delta(&[
            ("topic", json!("rust")),
            ("user:name", json!("Ada")),
            ("app:model", json!("m1")),
            ("temp:scratch", json!(1)),
        ]));
        state.apply(&delta(&[
            ("topic", json!("tokio")),
            ("user:name", Value::Null),
        ]));
        assert_eq!(state.get("topic"), Some(&json!("tokio")));
        assert_eq!(state.get("user:name"), None);
        assert_eq!(state.get("app:model"), Some(&json!("m1")));
        assert_eq!(state.get("temp:scratch"), None);
        assert!(state.user.is_empty());
        assert_eq!(state.app.get("model"), Some(&json!("m1")));
    }

    #[test]
    fn temp_keys_are_never_persistable() {
        let d = persistable(delta(&[("temp:a", json!(1)), ("b", json!(2))]));
        assert_eq!(d, delta(&[("b", json!(2))]));
        let split = SplitDelta::from_delta(&delta(&[
            ("temp:a", json!(1)),
            ("user:u", json!(2)),
            ("app:x", json!(3)),
            ("s", json!(4)),
        ]));
        assert_eq!(split.user, delta(&[("u", json!(2))]));
        assert_eq!(split.app, delta(&[("x", json!(3))]));
        assert_eq!(split.session, delta(&[("s", json!(4))]));
    }

    #[test]
    fn later_split_deltas_win() {
        let mut a = SplitDelta::from_delta(&delta(&[("k", json!(1)), ("user:u", json!(1))]));
        a.merge(SplitDelta::from_delta(&delta(&[("k", Value::Null)])));
        assert_eq!(a.session["k"], Value::Null);
        assert_eq!(a.user["u"], json!(1));
        assert!(!a.is_empty());
    }
}
