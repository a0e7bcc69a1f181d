//! Shared state on disk: a user's `user:` keys in `user.json`, the application's `app:` keys in
//! `app.json`. Each file is replaced whole, crash-safely, under the caller's lock.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::fsio::{self, read_optional, write_atomic};
use super::layout::{self, APP_FILE, USER_FILE};
use super::{stripe, Inner, USER_STATE_LOCKS};
use crate::key::SessionKey;
use crate::state::{
    apply_plain, check_schema, SplitDelta, StateDelta, StateMap, FIRST_SCHEMA_VERSION,
};
use crate::store::StoreError;

/// The contents of `user.json` or `app.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SharedFile {
    schema_version: u32,
    /// The user the file belongs to (absent for `app.json`), so a listing can tell whose it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_id: Option<String>,
    #[serde(default)]
    state: StateMap,
    /// Fields written by a newer turnstile of the same schema version: kept unchanged.
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a shared-state file; missing means empty. `key` is the session on whose behalf it is
/// read (named in a schema error); `what` names the file in a corruption error.
fn read(path: &Path, key: &SessionKey, what: &str) -> Result<SharedFile, StoreError> {
    let Some(bytes) = read_optional(path)? else {
        return Ok(SharedFile::default());
    };
    let corrupt = |e: serde_json::Error| StoreError::Corrupt {
        key: what.to_owned(),
        detail: format!("{}: {e}", path.display()),
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(corrupt)?;
    check_schema(&value).map_err(|source| StoreError::Schema {
        key: key.clone(),
        source,
    })?;
    serde_json::from_value(value).map_err(corrupt)
}

/// The state kept in a shared-state file.
fn read_state(path: &Path, key: &SessionKey, what: &str) -> Result<StateMap, StoreError> {
    Ok(read(path, key, what)?.state)
}

/// Applies `delta` to a shared-state file and writes it back crash-safely. The caller holds the
/// lock for this file.
fn update(
    path: &Path,
    key: &SessionKey,
    what: &str,
    user_id: Option<&str>,
    delta: &StateDelta,
) -> Result<(), StoreError> {
    let mut file = read(path, key, what)?;
    apply_plain(&mut file.state, delta);
    // Shared files have not changed form since version 1: older builds keep reading them.
    file.schema_version = file.schema_version.max(FIRST_SCHEMA_VERSION);
    file.user_id = user_id.map(str::to_owned);
    let bytes = serde_json::to_vec(&file).map_err(|e| StoreError::Corrupt {
        key: what.to_owned(),
        detail: format!("cannot serialise: {e}"),
    })?;
    write_atomic(path, &bytes)
}

/// A session's shared state, as the store reads and writes it under its locks.
impl Inner {
    fn user_file(&self, user_id: &str) -> PathBuf {
        layout::user_dir(&self.root, user_id).join(USER_FILE)
    }

    pub(super) fn shared_state(
        &self,
        key: &SessionKey,
    ) -> Result<(StateMap, StateMap), StoreError> {
        let user = if key.is_anonymous() {
            StateMap::new()
        } else {
            let what = format!("user {}", key.user_id());
            read_state(&self.user_file(key.user_id()), key, &what)?
        };
        let app = read_state(&self.root.join(APP_FILE), key, "app state")?;
        Ok((user, app))
    }

    pub(super) fn write_shared(
        &self,
        key: &SessionKey,
        delta: &SplitDelta,
    ) -> Result<(), StoreError> {
        if !key.is_anonymous() && !delta.user.is_empty() {
            let user_id = key.user_id();
            let _guard = self.user_state_locks[stripe(&user_id, USER_STATE_LOCKS)].lock();
            let what = format!("user {user_id}");
            let path = self.user_file(user_id);
            layout::refuse_links(&self.root, &[&path])?;
            // The user's folder may have been made by a journaled append, not yet durable: the
            // file must not vanish with it in a crash once the turn is acknowledged.
            let chain = layout::session_dir_chain(&self.root, key);
            fsio::create_durable_dirs(&chain[..chain.len() - 2])?;
            update(&path, key, &what, Some(user_id), &delta.user)?;
        }
        if !delta.app.is_empty() {
            let _guard = self.app_state_lock.lock();
            layout::refuse_links(&self.root, &[&self.root.join(APP_FILE)])?;
            update(
                &self.root.join(APP_FILE),
                key,
                "app state",
                None,
                &delta.app,
            )?;
        }
        Ok(())
    }
}
