//! Files on a local disk: the embedded default backend.
//!
//! The kit — what every family kept in files shares, public in [`kit`] for families written
//! outside the crate — is `layout` (how ids become file names, and the folders of a root) and
//! `fsio` (atomic replacement, directory syncs, reads that
//! tell a missing file from a failing one), the I/O threads every family here runs its file
//! work on (`pool`, a fixed number, [`io_threads`]) and the session store's write-ahead
//! `journal` (group commit). On it: the session store ([`FileStore`]), pairings
//! ([`FilePairingStore`], `pairings.json` in the store's root), artifacts
//! ([`FileArtifactStore`]) and memory across sessions ([`FileMemory`]).

mod artifacts;
mod fsio;
mod inbox;
mod journal;
pub mod kit;
pub(crate) mod layout;
mod memory;
mod pairings;
mod pool;
mod sessions;

pub use artifacts::FileArtifactStore;
pub use inbox::{FileInbox, INBOX_FOLDER};
pub use layout::{ARTIFACTS_FOLDER, MEMORY_FOLDER};
pub use memory::{FileMemory, MAX_LOADED_USERS};
pub use pairings::{FilePairingStore, PAIRINGS_FILE};
pub use pool::{io_threads, IO_THREADS_VAR};
#[cfg(feature = "testing")]
pub(crate) use sessions::probe;
pub use sessions::FileStore;
