//! What the runtime does with artifacts when sessions are deleted or forked, and declared
//! state keys' defaults in [`Runtime::state`].

use std::collections::HashMap;
use std::sync::Arc;

use super::Runtime;
use crate::artifact::{ArtifactError, ArtifactScope, ArtifactStore, USER_SCOPE_PREFIX};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::session::SessionView;
use crate::state::{Event, EventKind, Scope};

fn artifact_error(err: ArtifactError) -> Error {
    Error::Artifacts(Arc::new(err))
}

impl Runtime {
    /// The artifact store, if the runtime was built with one
    /// ([`crate::RuntimeBuilder::with_artifacts`]).
    pub fn artifacts(&self) -> Option<&Arc<dyn ArtifactStore>> {
        self.registry().deps.artifacts.as_ref()
    }

    /// The declared state keys, if the runtime was built with them
    /// ([`crate::RuntimeBuilder::state_keys`]).
    pub fn state_keys(&self) -> Option<&Arc<crate::state_keys::StateKeys>> {
        self.registry().deps.state_keys.as_ref()
    }

    /// Removes a deleted session's artifacts; returns whether there were any.
    pub(super) async fn delete_session_artifacts(&self, key: &SessionKey) -> Result<bool> {
        let Some(store) = self.artifacts() else {
            return Ok(false);
        };
        let scope = ArtifactScope::Session(key.clone());
        let removed = store.delete(&scope, None).await.map_err(artifact_error)?;
        Ok(removed > 0)
    }

    /// Removes a deleted user's artifacts (the user's own and every session's).
    pub(super) async fn delete_user_artifacts(&self, user_id: &str) -> Result<()> {
        match self.artifacts() {
            Some(store) if !user_id.is_empty() => {
                store.delete_user(user_id).await.map_err(artifact_error)?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Copies the source's session artifacts into the fork's scope as they were at the fork
    /// point: of each name, the versions older than the first one that an event after the fork
    /// point records. Copied in order, so a fresh target gets the same version numbers.
    pub(super) async fn fork_artifacts(
        &self,
        source: &SessionKey,
        target: &SessionKey,
        after_fork: &[Event],
    ) -> Result<()> {
        let Some(store) = self.artifacts() else {
            return Ok(());
        };
        let from = ArtifactScope::Session(source.clone());
        let to = ArtifactScope::Session(target.clone());
        let cutoffs = first_versions_after(after_fork);
        for meta in store.list(&from).await.map_err(artifact_error)? {
            let last = match cutoffs.get(meta.name.as_str()) {
                Some(first_later) => first_later.saturating_sub(1).min(meta.version),
                None => meta.version,
            };
            for version in 1..=last {
                let loaded = store.load(&from, &meta.name, Some(version)).await;
                let Some(artifact) = loaded.map_err(artifact_error)? else {
                    continue;
                };
                store
                    .save(&to, &meta.name, &artifact.data, &artifact.meta.mime)
                    .await
                    .map_err(artifact_error)?;
            }
        }
        Ok(())
    }

    /// Fills unset declared keys with their defaults in a view.
    pub(super) fn apply_defaults(&self, view: &mut SessionView) {
        let Some(keys) = self.state_keys() else {
            return;
        };
        for key in keys.keys() {
            let Some(default) = &key.default else {
                continue;
            };
            let (scope, plain) = Scope::split(&key.name);
            let map = match scope {
                Scope::Session => &mut view.record.state,
                Scope::User => &mut view.user_state,
                Scope::App => &mut view.app_state,
                Scope::Temp => continue,
            };
            map.entry(plain.to_owned())
                .or_insert_with(|| default.clone());
        }
    }
}

/// Of each session-scoped artifact name, the first version an event in `events` records.
fn first_versions_after(events: &[Event]) -> HashMap<&str, u64> {
    let mut first = HashMap::new();
    for event in events {
        if let EventKind::ArtifactSaved { name, version, .. } = &event.kind {
            if name.starts_with(USER_SCOPE_PREFIX) {
                continue;
            }
            let entry = first.entry(name.as_str()).or_insert(*version);
            *entry = (*entry).min(*version);
        }
    }
    first
}
