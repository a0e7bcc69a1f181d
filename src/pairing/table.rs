//! The pairing table in memory, with its reverse index, and its persisted document. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Pairing, PairingError};

/// The schema version of the pairings document this build writes and reads.
pub(crate) const PAIRINGS_SCHEMA_VERSION: u32 = 1;

/// Accounts to users, and users to accounts. Both maps always agree.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct PairingTable {
    /// `(channel, channel_user)` → user. Ordered, so the persisted document is stable.
    accounts: BTreeMap<(String, String), String>,
    /// user → their accounts, so that a user's pairings are found without a scan.
    users: HashMap<String, BTreeSet<(String, String)>>,
}

/// Counts only: who is paired with whom is users' data, not for logs.
impl std::fmt::Debug for PairingTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairingTable")
            .field("accounts", &self.accounts.len())
            .field("users", &self.users.len())
            .finish()
    }
}

impl PairingTable {
    pub(crate) fn get(&self, channel: &str, channel_user: &str) -> Option<&str> {
        self.accounts
            .get(&(channel.to_owned(), channel_user.to_owned()))
            .map(String::as_str)
    }

    pub(crate) fn put(&mut self, channel: &str, channel_user: &str, user: &str) -> Option<String> {
        let account = (channel.to_owned(), channel_user.to_owned());
        let old = self.accounts.insert(account.clone(), user.to_owned());
        if let Some(old) = &old {
            self.forget(old, &account);
        }
        self.users
            .entry(user.to_owned())
            .or_default()
            .insert(account);
        old
    }

    pub(crate) fn remove(&mut self, channel: &str, channel_user: &str) -> Option<String> {
        let account = (channel.to_owned(), channel_user.to_owned());
        let old = self.accounts.remove(&account)?;
        self.forget(&old, &account);
        Some(old)
    }

    pub(crate) fn of_user(&self, user: &str) -> Vec<Pairing> {
        self.users
            .get(user)
            .into_iter()
            .flatten()
            .map(|(channel, channel_user)| Pairing {
                channel: channel.clone(),
                channel_user: channel_user.clone(),
                user: user.to_owned(),
            })
            .collect()
    }

    pub(crate) fn remove_user(&mut self, user: &str) -> u64 {
        let accounts = self.users.remove(user).unwrap_or_default();
        for account in &accounts {
            self.accounts.remove(account);
        }
        accounts.len() as u64
    }

    fn forget(&mut self, user: &str, account: &(String, String)) {
        if let Some(set) = self.users.get_mut(user) {
            set.remove(account);
            if set.is_empty() {
                self.users.remove(user);
            }
        }
    }

    /// The persisted form: the pairings in order, plus fields a newer writer added.
    pub(crate) fn to_document(&self, extra: &Map<String, Value>) -> Document {
        Document {
            schema_version: PAIRINGS_SCHEMA_VERSION,
            pairings: self
                .accounts
                .iter()
                .map(|((channel, channel_user), user)| Pairing {
                    channel: channel.clone(),
                    channel_user: channel_user.clone(),
                    user: user.clone(),
                })
                .collect(),
            extra: extra.clone(),
        }
    }

    /// Reads a persisted document. A newer schema or an account listed twice is refused, never
    /// silently repaired.
    pub(crate) fn from_document(
        document: Document,
        place: &str,
    ) -> Result<(Self, Map<String, Value>), PairingError> {
        if document.schema_version > PAIRINGS_SCHEMA_VERSION {
            return Err(PairingError::Schema {
                place: place.to_owned(),
                found: document.schema_version,
                supported: PAIRINGS_SCHEMA_VERSION,
            });
        }
        let mut table = Self::default();
        for pairing in document.pairings {
            if table
                .put(&pairing.channel, &pairing.channel_user, &pairing.user)
                .is_some()
            {
                return Err(PairingError::Corrupt {
                    place: place.to_owned(),
                    detail: format!(
                        "the account {:?} on {:?} is listed twice",
                        pairing.channel_user, pairing.channel
                    ),
                });
            }
        }
        Ok((table, document.extra))
    }
}

/// The pairings file: `{"schema_version": 1, "pairings": [{channel, channel_user, user}, …]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Document {
    pub schema_version: u32,
    #[serde(default)]
    pub pairings: Vec<Pairing>,
    /// Fields written by a newer turnstile of the same schema version: kept unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairing_an_account_moves_it_between_users() {
        let mut table = PairingTable::default();
        assert_eq!(table.put("slack", "U1", "alice"), None);
        table.put("discord", "d1", "alice");
        assert_eq!(table.put("slack", "U1", "bob").as_deref(), Some("alice"));
        assert_eq!(table.get("slack", "U1"), Some("bob"));
        let alice: Vec<_> = table
            .of_user("alice")
            .into_iter()
            .map(|p| p.channel)
            .collect();
        assert_eq!(alice, ["discord"]);
        assert_eq!(table.of_user("bob").len(), 1);
    }

    #[test]
    fn removing_a_user_removes_only_their_accounts() {
        let mut table = PairingTable::default();
        table.put("slack", "U1", "alice");
        table.put("web", "w1", "alice");
        table.put("slack", "U2", "bob");
        assert_eq!(table.remove_user("alice"), 2);
        assert_eq!(table.get("slack", "U1"), None);
        assert_eq!(table.get("slack", "U2"), Some("bob"));
        assert_eq!(table.remove_user("alice"), 0);
        assert_eq!(table.remove("slack", "U2").as_deref(), Some("bob"));
        assert_eq!(
            table,
            PairingTable::default(),
            "both indexes are empty again"
        );
    }

    #[test]
    fn documents_round_trip_keep_unknown_fields_and_refuse_newer_schemas() {
        let mut table = PairingTable::default();
        table.put("slack", "U1", "alice");
        let mut extra = Map::new();
        extra.insert("future".into(), Value::from(7));
        let text = serde_json::to_string(&table.to_document(&extra)).unwrap();
        let doc: Document = serde_json::from_str(&text).unwrap();
        let (back, kept) = PairingTable::from_document(doc, "f").unwrap();
        assert_eq!(back, table);
        assert_eq!(kept, extra);

        let newer: Document =
            serde_json::from_str(r#"{"schema_version": 2, "pairings": []}"#).unwrap();
        assert!(matches!(
            PairingTable::from_document(newer, "f"),
            Err(PairingError::Schema { found: 2, .. })
        ));
        let twice: Document = serde_json::from_str(
            r#"{"schema_version": 1, "pairings": [
                {"channel": "s", "channel_user": "u", "user": "a"},
                {"channel": "s", "channel_user": "u", "user": "b"}]}"#,
        )
        .unwrap();
        assert!(matches!(
            PairingTable::from_document(twice, "f"),
            Err(PairingError::Corrupt { .. })
        ));
    }
}
