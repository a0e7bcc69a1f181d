//! The file store's pure key encoding and its synchronous recovery of one session from its files,
//! reachable from `crate::fuzzing` (feature `testing`) so that the fuzz targets and property
//! tests can drive them directly: no runtime, no head cache, no locks, and a panic surfaces as
//! one instead of as a failed blocking task.

use std::path::{Path, PathBuf};

use super::layout::{self, SessionPaths};
use super::{line, log};
use crate::key::SessionKey;
use crate::state::{Event, SessionRecord};
use crate::store::StoreError;

/// The folder name the file store gives a user or session id.
pub(crate) fn folder_name(id: &str) -> String {
    layout::encode_name(id)
}

/// The id a folder name stands for; `None` for hashed names and names the encoder never makes.
pub(crate) fn decode_folder_name(name: &str) -> Option<String> {
    layout::decode_name(name)
}

/// Longest folder name the encoder emits.
pub(crate) const MAX_FOLDER_NAME_BYTES: usize = layout::MAX_NAME_BYTES;

/// The folder of `key`'s session under `root`, and its head and log files in it.
pub(crate) fn session_files(root: &Path, key: &SessionKey) -> (PathBuf, PathBuf, PathBuf) {
    let paths = SessionPaths::of(root, key);
    (paths.dir, paths.head, paths.log)
}

/// One append as the store writes it to the log: each event a line, the last one marked.
pub(crate) fn encode_append(events: &[Event], version: u64) -> Vec<u8> {
    line::encode_append(events, version).expect("events always serialise as JSON objects")
}

/// A head as the store writes it, covering the first `log_bytes` bytes of the log.
pub(crate) fn encode_head(record: &SessionRecord, log_bytes: u64) -> Vec<u8> {
    log::encode_head(record, log_bytes).expect("a record always serialises")
}

/// What loading a session recovered from its files.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recovered {
    /// The head with the complete appends past it folded in.
    pub(crate) record: Option<SessionRecord>,
    /// The newest `window` events, as a load returns them.
    pub(crate) window: Vec<Event>,
}

/// Reads `key`'s session the way a load does (head, log tail, window), without the cache.
pub(crate) fn recover(
    root: &Path,
    key: &SessionKey,
    window: usize,
) -> Result<Recovered, StoreError> {
    let paths = SessionPaths::of(root, key);
    let current = log::read_current(&paths, key)?;
    let window = match &current.record {
        Some(record) => log::read_tail(&paths, key, current.log_end, record.next_seq, window)?,
        None => Vec::new(),
    };
    Ok(Recovered {
        record: current.record,
        window,
    })
}

/// Reads every event of `key`'s valid log from the start, the way `read_events` does.
pub(crate) fn read_all(root: &Path, key: &SessionKey) -> Result<Vec<Event>, StoreError> {
    let paths = SessionPaths::of(root, key);
    let current = log::read_current(&paths, key)?;
    let next_seq = current.record.as_ref().map_or(1, |r| r.next_seq);
    log::scan(&paths, key, current.log_end, next_seq, 1, usize::MAX)
}
