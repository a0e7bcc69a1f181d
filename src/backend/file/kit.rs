//! The file kit, for a family of your own kept in files beside turnstile's (in a
//! [`FileStore`](super::FileStore)'s root, say, under a folder of its own): the same steps
//! turnstile's file families are built from.
//!
//! - Names: [`encode_name`] makes any id a safe, unique file name (never `/`, `.`, `..`, upper
//!   case or a control character; long ids hashed), [`decode_name`] reads one back.
//! - Writes: [`write_atomic`] replaces a file so that a crash leaves the old or the new content
//!   (temporary file, fsync, rename, folder fsync); [`create_dirs`] makes folders durable;
//!   [`remove_dir`] removes a folder as one durable step (through a trash folder);
//!   [`refuse_links`] refuses a path with a symbolic link below the root, so that a planted
//!   link cannot send writes elsewhere.
//! - Reads: [`read_optional`] tells a missing file (`None`) from a failing one.
//! - Threads: [`run_io`] runs blocking file work on the kit's fixed I/O threads (see
//!   [`io_threads`](super::io_threads)), never on the caller's runtime.
//!
//! Errors are [`StoreError`]s naming the step and the path. See `docs/stores.md`, "Adding a
//! backend", and `tests/a_family_outside_the_crate_is_built_on_the_backend_kits.rs` for a family
//! built on this kit.

pub use super::fsio::{create_dirs, read_optional, remove_dir, sync_dir, write_atomic};
pub use super::layout::{decode_name, encode_name, refuse_links};
use crate::store::StoreError;

/// Runs blocking file work on the file kit's I/O threads and waits for it. A panic in `work` is
/// resumed here; `Unavailable` says the work did not run (the threads shut down).
pub async fn run_io<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    super::pool::run(work).await.unwrap_or_else(|detail| {
        Err(StoreError::Unavailable {
            backend: "file",
            detail,
        })
    })
}
