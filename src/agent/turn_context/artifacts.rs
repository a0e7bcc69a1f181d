//! A turn's artifacts: [`TurnContext::save_artifact`] and [`TurnContext::load_artifact`].

use super::{ToolEntry, TurnContext};
use crate::artifact::{Artifact, ArtifactError, ArtifactScope, ArtifactStore, USER_SCOPE_PREFIX};
use crate::key::{KeyError, KeyPart};

impl TurnContext {
    /// Saves `bytes` as the next version of `name` and returns the version. The turn's log
    /// records an `artifact_saved` event for it (when the turn leaves a trace: a turn that fails
    /// records nothing, though the version stays in the store).
    ///
    /// A name starting with `user:` is saved in the user's scope, any other in the session's.
    /// Fails with [`ArtifactError::NotConfigured`] when the runtime has no artifact store.
    pub async fn save_artifact(
        &self,
        name: &str,
        bytes: impl AsRef<[u8]>,
        mime: &str,
    ) -> Result<u64, ArtifactError> {
        let (store, scope, plain) = self.artifact_target(name)?;
        let bytes = bytes.as_ref();
        let version = store.save(&scope, plain, bytes, mime).await?;
        self.record.lock().tools.push(ToolEntry::Artifact {
            name: name.to_owned(),
            version,
            bytes: bytes.len() as u64,
            mime: mime.to_owned(),
        });
        Ok(version)
    }

    /// Loads a version of `name` (`Some(n)`) or its newest (`None`); `Ok(None)` when there is
    /// none. Names follow [`TurnContext::save_artifact`]'s scope rule.
    pub async fn load_artifact(
        &self,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Artifact>, ArtifactError> {
        let (store, scope, plain) = self.artifact_target(name)?;
        store.load(&scope, plain, version).await
    }

    /// The store, scope and plain name a turn's artifact name points at.
    fn artifact_target<'a>(
        &self,
        name: &'a str,
    ) -> Result<(&dyn ArtifactStore, ArtifactScope, &'a str), ArtifactError> {
        let store = self
            .artifacts
            .as_deref()
            .ok_or(ArtifactError::NotConfigured)?;
        match name.strip_prefix(USER_SCOPE_PREFIX) {
            Some(_) if self.key.is_anonymous() => {
                Err(ArtifactError::InvalidScope(KeyError::Empty(KeyPart::User)))
            }
            Some(plain) => Ok((store, ArtifactScope::user(self.key.user_id())?, plain)),
            None => Ok((store, ArtifactScope::Session(self.key.clone()), name)),
        }
    }
}
