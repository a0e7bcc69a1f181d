//! `sessions delete`, `delete-user` and `gc`: the sessions, and the artifacts kept for them in the
//! artifact store `serve` would use for the same `--store` (`--artifacts`, see
//! `docs/artifacts.md`), as `Runtime::delete` and `delete_user` do.

use std::process::ExitCode;
use std::sync::Arc;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use turnstile::artifact::{ArtifactError, ArtifactScope, ArtifactStore, DEFAULT_MAX_BYTES};
use turnstile::backend::{ArtifactPlace, OpenedStore};
use turnstile::store::GcPolicy;
use turnstile::SessionKey;

use super::{exit, print_json};

/// The artifact store beside the session store, if there is one to delete from.
pub(super) enum Artifacts {
    /// No artifact store: `off`, or nothing beside a PostgreSQL store (with a note for stderr,
    /// since artifacts may have been left behind). Reported as `null`.
    None(Option<String>),
    /// The `artifacts/` folder of a file store that never had one: nothing to delete, and not
    /// created just to find that out. Reported as 0 versions.
    Empty,
    /// The store to delete from.
    Store(Arc<dyn ArtifactStore>),
}

impl Artifacts {
    /// Opens what `--artifacts` names for this store. A file store's `artifacts/` folder that
    /// does not exist is not created: it holds nothing to delete.
    pub(super) async fn open(spelled: &str, opened: &OpenedStore) -> Result<Self, String> {
        let place =
            ArtifactPlace::resolve(spelled, opened).map_err(|e| format!("--artifacts: {e}"))?;
        match &place {
            ArtifactPlace::NoneBeside(store) => {
                return Ok(Self::None(Some(format!(
                    "no artifacts were deleted: a {store} store keeps none beside it; give \
                     --artifacts with the place `serve --artifacts` used"
                ))))
            }
            ArtifactPlace::Folder { dir, beside: true } if !dir.exists() => return Ok(Self::Empty),
            ArtifactPlace::Memory if spelled == "memory" => {
                return Err(
                    "--artifacts memory names this command's own memory, which holds no \
                     artifact of any server: give the place `serve --artifacts` used (file:DIR \
                     or redis://HOST:PORT)"
                        .into(),
                )
            }
            _ => {}
        }
        let opened = place
            .open(DEFAULT_MAX_BYTES)
            .await
            .map_err(|e| format!("--artifacts: {e}"))?;
        Ok(match opened {
            Some(store) => Self::Store(store),
            None => Self::None(None),
        })
    }

    /// Runs `delete` on the store; the versions it removed, `None` without a store.
    async fn delete<F>(&self, delete: F) -> Result<Option<u64>, ArtifactError>
    where
        F: AsyncFnOnce(&dyn ArtifactStore) -> Result<u64, ArtifactError>,
    {
        match self {
            Self::None(_) => Ok(None),
            Self::Empty => Ok(Some(0)),
            Self::Store(store) => delete(store.as_ref()).await.map(Some),
        }
    }

    fn noted(&self) {
        if let Self::None(Some(note)) = self {
            eprintln!("turnstile: {note}");
        }
    }
}

/// Deletes a session, then its artifacts. Succeeds when either existed, like `Runtime::delete`.
pub(super) async fn delete(
    opened: &OpenedStore,
    artifacts: &Artifacts,
    key: &SessionKey,
    json: bool,
) -> Result<ExitCode, String> {
    let deleted = opened
        .store()
        .delete(key)
        .await
        .map_err(|e| format!("cannot delete {key}: {e}"))?;
    let scope = ArtifactScope::Session(key.clone());
    let versions = artifacts
        .delete(async |store: &dyn ArtifactStore| store.delete(&scope, None).await)
        .await
        .map_err(|e| format!("deleted the session {key}, not its artifacts: {e}"))?;
    if json {
        print_json(&json!({ "key": key, "deleted": deleted, "artifacts_deleted": versions }));
    } else {
        let what = if deleted {
            format!("deleted {key}")
        } else {
            format!("no session {key}")
        };
        match versions {
            Some(n) if deleted || n > 0 => println!("{what} and {n} artifact versions"),
            _ => println!("{what}"),
        }
    }
    artifacts.noted();
    Ok(exit(deleted || versions.unwrap_or(0) > 0))
}

/// Deletes a user's sessions and shared state, then the user's artifacts (its own and every
/// session's).
pub(super) async fn delete_user(
    opened: &OpenedStore,
    artifacts: &Artifacts,
    user: &str,
    json: bool,
) -> Result<ExitCode, String> {
    let deleted = opened
        .store()
        .delete_user(user)
        .await
        .map_err(|e| format!("cannot delete user {user:?}: {e}"))?;
    let versions = artifacts
        .delete(async |store: &dyn ArtifactStore| store.delete_user(user).await)
        .await
        .map_err(|e| format!("deleted the sessions of user {user:?}, not its artifacts: {e}"))?;
    if json {
        print_json(&json!({ "user": user, "deleted": deleted, "artifacts_deleted": versions }));
    } else {
        let artifacts = versions.map_or(String::new(), |n| format!(", {n} artifact versions"));
        println!("deleted {deleted} sessions of user {user:?}{artifacts} and its shared state");
    }
    artifacts.noted();
    Ok(ExitCode::SUCCESS)
}

/// Removes sessions by `policy`, then each removed session's artifacts.
pub(super) async fn gc(
    opened: &OpenedStore,
    artifacts: &Artifacts,
    policy: &GcPolicy,
    json: bool,
) -> Result<ExitCode, String> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let report = opened
        .store()
        .gc(policy, now_ms)
        .await
        .map_err(|e| format!("gc failed: {e}"))?;
    let removed = &report.removed;
    let versions = artifacts
        .delete(async |store: &dyn ArtifactStore| {
            let mut versions = 0;
            for key in removed {
                let scope = ArtifactScope::Session(key.clone());
                versions += store.delete(&scope, None).await?;
            }
            Ok(versions)
        })
        .await
        .map_err(|e| {
            format!(
                "removed {} sessions, not all of their artifacts: {e}",
                removed.len()
            )
        })?;
    if json {
        print_json(&json!({ "removed": removed, "artifacts_deleted": versions }));
    } else {
        let artifacts = versions.map_or(String::new(), |n| format!(" and {n} artifact versions"));
        println!("removed {} sessions{artifacts}", removed.len());
        for key in removed {
            println!("  {key}");
        }
    }
    artifacts.noted();
    Ok(ExitCode::SUCCESS)
}
