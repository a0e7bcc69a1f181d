//! How a journal segment is laid out, and reading it back: pure, no I/O.
//!
//! ```text
//! segment := "turnstile-journal 2\n" batch* zero*
//! batch   := "TJB1" len:u32le crc32:u32le payload[len]
//! payload := entry+
//! entry   := header-json "\n" bytes[header.len]      (op "append": the bytes written at "at";
//!                                                     op "replace": the file's new content)
//!          | header-json "\n"                         (op "remove": a folder removed)
//! ```
//!
//! A batch is what one flush covered: the committer writes a batch whole and writes the next one
//! only once the flush of this one returned. So a damaged batch with an intact batch after it is
//! damage to acknowledged data (`Corrupt`), while a damaged or short batch at the very end is
//! the unfinished batch of a crash: none of its entries was acknowledged, and it is cut off.
//!
//! The writer grows a segment ahead of its batches with zeros (see `threads.rs`), so zeros after
//! the last intact batch are room not yet used, in any segment. Format 1, written by earlier
//! builds, had no such room: it is still read, with zeros there taken as a damaged batch.

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The first line of every segment this build writes.
pub(super) const SEGMENT_HEADER: &[u8] = b"turnstile-journal 2\n";
/// The first line of a segment of format 1 (no zeroed room after its batches).
const SEGMENT_HEADER_V1: &[u8] = b"turnstile-journal 1\n";
/// What a segment's first line starts with, whatever its version.
const SEGMENT_HEADER_PREFIX: &[u8] = b"turnstile-journal ";
/// The segment format this build writes, and the newest it reads.
pub(super) const SEGMENT_VERSION: u32 = 2;
/// What every batch starts with.
const BATCH_MAGIC: &[u8; 4] = b"TJB1";
/// The batch's frame before its payload: magic, length, CRC-32.
pub(super) const BATCH_FRAME: usize = 12;
/// The largest batch payload a reader accepts, and so the largest entry a writer takes: a
/// length past it is damage, not a batch.
pub(super) const MAX_PAYLOAD: u32 = 256 * 1024 * 1024;

/// One change the journal makes durable, with its path relative to the store's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// `bytes` written at offset `at` of the file `path` (its end before the write).
    Append {
        /// The file, relative to the root.
        path: PathBuf,
        /// Where the bytes start.
        at: u64,
        /// What was written.
        bytes: Vec<u8>,
    },
    /// The file `path` replaced whole by `bytes` (written to a temporary file and renamed over
    /// it, once the entry is durable).
    Replace {
        /// The file, relative to the root.
        path: PathBuf,
        /// Its new content.
        bytes: Vec<u8>,
    },
    /// The folder `path` and everything in it removed.
    Remove {
        /// The folder, relative to the root.
        path: PathBuf,
    },
}

/// An entry's header line. Its path is borrowed from the entry when it is written (an append
/// encodes one for every entry) and owned when it is read.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Header<'a> {
    Append {
        path: Cow<'a, str>,
        at: u64,
        len: u64,
    },
    Replace {
        path: Cow<'a, str>,
        len: u64,
    },
    Remove {
        path: Cow<'a, str>,
    },
}

impl Entry {
    /// Appends the entry's encoding to `out`: its header line, then its bytes, as the committer
    /// writes them (for tests).
    #[cfg(test)]
    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), String> {
        self.encode_header(out)?;
        out.extend_from_slice(self.bytes());
        Ok(())
    }

    /// Appends the entry's header line to `out`: its encoding without its bytes, which follow
    /// it in the journal (the committer writes them from where they already are). A path that
    /// is not plain UTF-8 relative names is refused: the store's layout never makes one.
    pub(super) fn encode_header(&self, out: &mut Vec<u8>) -> Result<(), String> {
        let header = match self {
            Entry::Append { path, at, bytes } => Header::Append {
                path: relative_text(path)?,
                at: *at,
                len: bytes.len() as u64,
            },
            Entry::Replace { path, bytes } => Header::Replace {
                path: relative_text(path)?,
                len: bytes.len() as u64,
            },
            Entry::Remove { path } => Header::Remove {
                path: relative_text(path)?,
            },
        };
        serde_json::to_writer(&mut *out, &header).map_err(|e| e.to_string())?;
        out.push(b'\n');
        Ok(())
    }

    /// The file or folder it changes, relative to the root.
    pub(super) fn path(&self) -> &Path {
        match self {
            Entry::Append { path, .. } | Entry::Replace { path, .. } | Entry::Remove { path } => {
                path
            }
        }
    }

    /// The bytes the entry writes (none for a removal).
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Entry::Append { bytes, .. } | Entry::Replace { bytes, .. } => bytes,
            Entry::Remove { .. } => &[],
        }
    }
}

/// `path` as text, if it is a plain relative path (names only: no root, `.`, `..` or prefix).
fn relative_text(path: &Path) -> Result<Cow<'_, str>, String> {
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)))
        && path.components().next().is_some();
    match (plain, path.to_str()) {
        (true, Some(text)) => Ok(Cow::Borrowed(text)),
        _ => Err(format!(
            "{} is not a plain path inside the root",
            path.display()
        )),
    }
}

/// Appends one batch to `out`: its frame, then `pieces`, which together are its payload (the
/// committer passes each entry's header line and bytes, so that neither is copied into an
/// encoding of its own first).
pub(super) fn frame_batch<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(BATCH_MAGIC);
    // Length and checksum, filled in once the payload is there.
    out.extend_from_slice(&[0; BATCH_FRAME - BATCH_MAGIC.len()]);
    let mut crc = crc32fast::Hasher::new();
    for piece in pieces {
        crc.update(piece);
        out.extend_from_slice(piece);
    }
    let len = u32::try_from(out.len() - start - BATCH_FRAME)
        .expect("a batch is smaller than MAX_PAYLOAD");
    let fields = start + BATCH_MAGIC.len();
    out[fields..fields + 4].copy_from_slice(&len.to_le_bytes());
    out[fields + 4..fields + 8].copy_from_slice(&crc.finalize().to_le_bytes());
}

/// What reading a segment found.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Read {
    /// The entries of every intact batch, in order.
    pub entries: Vec<Entry>,
    /// Where the intact batches end.
    pub valid_len: u64,
    /// Whether an unfinished batch follows them (cut off), rather than nothing or zeroed room.
    pub unfinished: bool,
}

/// Why a segment cannot be replayed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadError {
    /// Written by a newer build (the version its first line names).
    Newer(u32),
    /// Damaged where it was acknowledged; what and where.
    Damaged(String),
}

/// Reads a whole segment; see the module docs for what is cut and what is damage. Only the
/// `last` segment can end in an unfinished batch: an earlier one was closed after the flush of
/// its last batch returned, so a damaged end there is damage.
pub(super) fn read_segment(bytes: &[u8], last: bool) -> Result<Read, ReadError> {
    let nothing = Read {
        entries: Vec::new(),
        valid_len: 0,
        unfinished: false,
    };
    let header_len = SEGMENT_HEADER.len();
    if bytes.len() < header_len
        && (SEGMENT_HEADER.starts_with(bytes) || SEGMENT_HEADER_V1.starts_with(bytes))
    {
        // A crash right after the segment was made, before its first line was flushed: there
        // is nothing in it.
        return Ok(nothing);
    }
    let zeroed_room = if bytes.starts_with(SEGMENT_HEADER) {
        true
    } else if bytes.starts_with(SEGMENT_HEADER_V1) {
        false
    } else {
        return Err(header_error(bytes));
    };
    let mut entries = Vec::new();
    let mut at = header_len;
    let mut unfinished = false;
    while at < bytes.len() {
        let payload = match batch_at(bytes, at) {
            Some(payload) => payload,
            None if zeroed_room && bytes[at..].iter().all(|b| *b == 0) => break,
            None => {
                // Damaged or short: acknowledged only if an intact batch follows it.
                if let Some(next) = next_batch_after(bytes, at) {
                    return Err(ReadError::Damaged(format!(
                        "the batch at byte {at} is damaged, yet an intact batch follows at byte {next}"
                    )));
                }
                if !last {
                    return Err(ReadError::Damaged(format!(
                        "the batch at byte {at} is damaged, and a newer segment follows"
                    )));
                }
                unfinished = true;
                break;
            }
        };
        decode_payload(payload, &mut entries)
            .map_err(|e| ReadError::Damaged(format!("the batch at byte {at}: {e}")))?;
        at += BATCH_FRAME + payload.len();
    }
    Ok(Read {
        entries,
        valid_len: at as u64,
        unfinished,
    })
}

/// Why a segment's first line is not this build's.
fn header_error(bytes: &[u8]) -> ReadError {
    if let Some(rest) = bytes.strip_prefix(SEGMENT_HEADER_PREFIX) {
        let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
        if let Some(version) = std::str::from_utf8(line)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
        {
            if version > SEGMENT_VERSION {
                return ReadError::Newer(version);
            }
        }
    }
    ReadError::Damaged("it does not start with a journal header".to_owned())
}

/// The intact batch's payload at `at`, if there is one.
fn batch_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let frame = bytes.get(at..at + BATCH_FRAME)?;
    if &frame[..4] != BATCH_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(frame[4..8].try_into().ok()?);
    if len == 0 || len > MAX_PAYLOAD {
        return None;
    }
    let crc = u32::from_le_bytes(frame[8..12].try_into().ok()?);
    let start = at + BATCH_FRAME;
    let payload = bytes.get(start..start + len as usize)?;
    (crc32fast::hash(payload) == crc).then_some(payload)
}

/// The start of an intact batch somewhere after the damaged one at `at`, if any.
fn next_batch_after(bytes: &[u8], at: usize) -> Option<usize> {
    (at + 1..bytes.len().saturating_sub(BATCH_FRAME - 1))
        .filter(|&i| bytes[i..].starts_with(BATCH_MAGIC))
        .find(|&i| batch_at(bytes, i).is_some())
}

/// Decodes a batch's entries onto `entries`.
fn decode_payload(mut payload: &[u8], entries: &mut Vec<Entry>) -> Result<(), String> {
    if payload.is_empty() {
        return Err("it holds no entry".to_owned());
    }
    while !payload.is_empty() {
        let end = payload
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("an entry's header has no end")?;
        let header: Header = serde_json::from_slice(&payload[..end])
            .map_err(|e| format!("an entry's header cannot be read: {e}"))?;
        payload = &payload[end + 1..];
        let mut take = |len: u64, path: &str| -> Result<Vec<u8>, String> {
            let len = usize::try_from(len).map_err(|_| "an entry's length is too large")?;
            if len > payload.len() {
                return Err(format!(
                    "an entry of {len} bytes for {path} runs past the batch's end"
                ));
            }
            let (bytes, rest) = payload.split_at(len);
            payload = rest;
            Ok(bytes.to_vec())
        };
        entries.push(match header {
            Header::Append { path, at, len } => Entry::Append {
                bytes: take(len, &path)?,
                path: checked_path(&path)?,
                at,
            },
            Header::Replace { path, len } => Entry::Replace {
                bytes: take(len, &path)?,
                path: checked_path(&path)?,
            },
            Header::Remove { path } => Entry::Remove {
                path: checked_path(&path)?,
            },
        });
    }
    Ok(())
}

/// A path read from a journal, refused unless it is plain names inside the root.
fn checked_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    relative_text(&path)?;
    Ok(path)
}

/// An append entry, for tests.
#[cfg(test)]
pub(super) fn append(path: &str, at: u64, bytes: &[u8]) -> Entry {
    Entry::Append {
        path: path.into(),
        at,
        bytes: bytes.to_vec(),
    }
}

/// A segment of this build's format holding `batches`, each framed as the committer frames
/// one, with no room after them: for tests.
#[cfg(test)]
pub(super) fn segment(batches: &[&[Entry]]) -> Vec<u8> {
    let mut out = SEGMENT_HEADER.to_vec();
    for batch in batches {
        let mut payload = Vec::new();
        for entry in *batch {
            entry.encode(&mut payload).unwrap();
        }
        frame_batch([payload.as_slice()], &mut out);
    }
    out
}

#[cfg(test)]
mod tests;
