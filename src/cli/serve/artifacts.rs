//! `serve --artifacts` and `serve --state-keys`: where artifacts live, and the registry of
//! declared state keys.

use std::sync::Arc;

use turnstile::artifact::ArtifactStore;
use turnstile::backend::{ArtifactPlace, OpenedStore};
use turnstile::state_keys::{Mode, StateKeys};

use super::ServeArgs;

/// Opens the artifact store `--artifacts` names (see [`ArtifactPlace::resolve`]). With a store
/// that has no place for artifacts beside it, `auto` is refused: a server would otherwise take
/// uploads it cannot keep.
pub(super) async fn open_artifacts(
    args: &ServeArgs,
    opened: &OpenedStore,
) -> Result<Option<Arc<dyn ArtifactStore>>, String> {
    let place =
        ArtifactPlace::resolve(&args.artifacts, opened).map_err(|e| format!("--artifacts: {e}"))?;
    match place {
        ArtifactPlace::NoneBeside(store) => Err(format!(
            "--artifacts auto has no place for artifacts beside the store {store}; \
             give --artifacts memory, file:DIR, redis://… or off"
        )),
        place => place
            .open(args.artifact_max_bytes)
            .await
            .map_err(|e| format!("--artifacts: {e}")),
    }
}

/// The registry `--state-keys FILE` names, in the mode `--state-keys-mode` gives (else the
/// file's own `mode`); `None` without the flag.
pub(super) fn load_state_keys(args: &ServeArgs) -> Result<Option<StateKeys>, String> {
    let Some(path) = &args.state_keys else {
        if args.state_keys_mode.is_some() {
            return Err("--state-keys-mode needs --state-keys FILE".to_owned());
        }
        return Ok(None);
    };
    let keys = StateKeys::load(path).map_err(|e| e.to_string())?;
    let mode: Option<Mode> = args.state_keys_mode;
    Ok(Some(match mode {
        Some(mode) => keys.with_mode(mode),
        None => keys,
    }))
}
