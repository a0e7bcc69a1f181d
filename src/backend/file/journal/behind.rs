//! Session writes the journal made durable but that are not yet in the session's files: the
//! file store writes them *behind* the journal, many appends of a session in one write, instead
//! of opening and writing the log on every append.
//!
//! A session's debt is the log bytes owed (each run of them with the offset it starts at) and
//! the newest `head.json` owed. It is written — log bytes first, then the head, so that no head
//! on disk covers log bytes that are not there — when a reader of the session's files asks
//! ([`Behind::settle`]), when the debts pass [`OWED_BYTES`], a short while after they were made
//! ([`WRITE_AFTER`]), and before a journal segment is checkpointed (which then flushes the
//! files). Until then the journal holds the bytes durably, and a restart's replay writes them.
//!
//! Writers are serialised ([`Behind::writing`]), so a session's debt is never written by two
//! threads at once and a reader that settled a session knows nothing of it is still on its way.
//! A debt that cannot be written is put back (readers of that session get the error) and the
//! journal stops: the files would otherwise fall behind what was acknowledged for good.

use std::collections::{HashMap, HashSet};
use std::io::IoSlice;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::backend::file::fsio::{io_error, keep_cut, open_in_place, replace_unflushed};
use crate::backend::file::layout::{refuse_links, HEAD_FILE, LOG_FILE};
use crate::store::StoreError;

/// Once the debts hold this many bytes, the journal's checkpoint thread writes them all.
///
/// Bounds what debts cost in memory (every owed byte is also in the journal, on disk) while a
/// session's turns in a burst still coalesce into one write of its log.
pub(crate) const OWED_BYTES: usize = 8 * 1024 * 1024;

/// Past this many bytes owed (the checkpoint thread falling behind), the journal's committer
/// writes the debts itself before it takes the next batch: appends then wait for the disk.
pub(crate) const OWED_BYTES_MAX: usize = 4 * OWED_BYTES;

/// Debts are written at the latest this long after the oldest was made, so that the files of
/// a quiet store catch up with it.
pub(crate) const WRITE_AFTER: Duration = Duration::from_millis(500);

/// Folders [`Behind::settle_all`] writes per hold of the writers' lock.
const SLICE: usize = 64;

/// Threads that write one slice.
const WRITERS: usize = 4;

/// One write the journal made durable for a session file, to be written behind.
#[derive(Debug)]
pub(crate) enum Owed {
    /// `bytes` at offset `at` of the session's log.
    Log { at: u64, bytes: Vec<u8> },
    /// The session's new `head.json`.
    Head(Vec<u8>),
}

impl Owed {
    /// The bytes it writes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Owed::Log { bytes, .. } | Owed::Head(bytes) => bytes,
        }
    }
}

/// What one session folder is owed.
#[derive(Debug, Default)]
struct Debt {
    /// Runs of log bytes, each with its offset; an append continuing the last run joins it.
    log: Vec<Run>,
    head: Option<Vec<u8>>,
    /// The number of the oldest write it holds ([`Owing::next`] when it was owed).
    oldest: u64,
}

/// Log bytes owed from one offset on: the appends' own buffers, in order, written with one
/// vectored write. Kept as the buffers the journal was given rather than copied into one: a
/// busy session's run reaches hundreds of kilobytes before it is written, and growing one
/// buffer that large a piece at a time cost the journal's committer more (reallocations onto
/// fresh pages) than the rest of its work.
#[derive(Debug)]
struct Run {
    at: u64,
    len: u64,
    pieces: Vec<Vec<u8>>,
}

impl Run {
    fn end(&self) -> u64 {
        self.at + self.len
    }

    /// Its bytes as one buffer (for the rare comparison with what a log holds).
    fn joined(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

impl Debt {
    fn add(&mut self, owed: Owed) {
        match owed {
            Owed::Log { at, bytes } => match self.log.last_mut() {
                Some(run) if run.end() == at => {
                    run.len += bytes.len() as u64;
                    run.pieces.push(bytes);
                }
                _ => self.log.push(Run {
                    at,
                    len: bytes.len() as u64,
                    pieces: vec![bytes],
                }),
            },
            Owed::Head(bytes) => self.head = Some(bytes),
        }
    }

    fn bytes(&self) -> usize {
        self.log.iter().map(|run| run.len as usize).sum::<usize>()
            + self.head.as_ref().map_or(0, Vec::len)
    }

    /// Puts `older` (taken out earlier, then not written) in front of what was owed since.
    fn prepend(&mut self, mut older: Debt) {
        older.log.append(&mut self.log);
        self.log = older.log;
        if self.head.is_none() {
            self.head = older.head;
        }
        self.oldest = self.oldest.min(older.oldest);
    }
}

/// Every session folder's debt; see the module docs.
#[derive(Debug)]
pub(crate) struct Behind {
    root: PathBuf,
    owed: Mutex<Owing>,
    /// Held by whoever writes debts (or discards them), for the whole write: what a writer
    /// takes out of [`Owing::debts`] is in [`Owing::in_flight`] until it is written or put back,
    /// and only while this is held.
    writing: Mutex<()>,
}

#[derive(Debug, Default)]
struct Owing {
    /// By session folder (absolute).
    debts: HashMap<PathBuf, Debt>,
    /// What the debts hold, in bytes.
    bytes: usize,
    /// When the oldest debt still owed was made.
    since: Option<Instant>,
    /// Numbers the writes owed, in order, so that a settle can tell what was owed before it.
    next: u64,
    /// Folders whose debt a writer took and is writing.
    in_flight: HashSet<PathBuf>,
}

impl Owing {
    /// Takes `dir`'s debt out, to be written by the caller (who holds the writers' lock).
    fn take(&mut self, dir: &Path) -> Option<Debt> {
        let debt = self.debts.remove(dir)?;
        self.bytes -= debt.bytes();
        if self.debts.is_empty() {
            self.since = None;
        }
        self.in_flight.insert(dir.to_owned());
        Some(debt)
    }

    /// Ends a write of `dir`'s debt taken with [`Owing::take`]: `unwritten` is put back in
    /// front of anything owed since.
    fn done(&mut self, dir: &Path, unwritten: Option<Debt>) {
        self.in_flight.remove(dir);
        if let Some(older) = unwritten {
            let debt = self.debts.entry(dir.to_owned()).or_insert_with(|| Debt {
                oldest: older.oldest,
                ..Debt::default()
            });
            let before = debt.bytes();
            debt.prepend(older);
            self.bytes = self.bytes + debt.bytes() - before;
            self.since.get_or_insert_with(Instant::now);
        }
    }
}

impl Behind {
    pub(crate) fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            owed: Mutex::new(Owing::default()),
            writing: Mutex::new(()),
        }
    }

    /// Records that `path` (relative to the root) is owed `owed`; returns the bytes now owed in
    /// all.
    pub(crate) fn owe(&self, path: &Path, owed: Owed) -> usize {
        let dir = match self.root.join(path).parent() {
            Some(dir) => dir.to_owned(),
            None => self.root.clone(),
        };
        let mut owing = self.owed.lock();
        let number = owing.next;
        owing.next += 1;
        let debt = owing.debts.entry(dir).or_insert_with(|| Debt {
            oldest: number,
            ..Debt::default()
        });
        let before = debt.bytes();
        debt.add(owed);
        let after = debt.bytes();
        owing.bytes = owing.bytes + after - before;
        owing.since.get_or_insert_with(Instant::now);
        owing.bytes
    }

    /// Bytes owed in all, and how long the oldest debt has waited.
    pub(crate) fn owing(&self) -> (usize, Option<Duration>) {
        let owing = self.owed.lock();
        (owing.bytes, owing.since.map(|since| since.elapsed()))
    }

    /// Writes what the session folder `dir` (absolute) is owed, if anything. Once this returns
    /// `Ok`, its files hold everything journaled for it before the call. Blocking.
    pub(crate) fn settle(&self, dir: &Path) -> Result<(), StoreError> {
        {
            // The common case — nothing owed, nothing on its way — takes no writer's turn.
            let owing = self.owed.lock();
            if !owing.debts.contains_key(dir) && !owing.in_flight.contains(dir) {
                return Ok(());
            }
        }
        let _writing = self.writing.lock();
        let Some(debt) = self.owed.lock().take(dir) else {
            return Ok(());
        };
        self.write(dir, debt)
    }

    /// Writes every debt owed when it is called: once this returns `Ok`, the files hold every
    /// write owed before the call (none of them is still on its way). Blocking; the first
    /// failure is returned (the debts not written stay). Works in slices of [`SLICE`] folders,
    /// so that a reader settling one session waits for a slice, not for everything.
    pub(crate) fn settle_all(&self) -> Result<(), StoreError> {
        let limit = self.owed.lock().next;
        loop {
            // Taking the writers' lock also waits for writes other threads have on their way.
            let _writing = self.writing.lock();
            let slice: Vec<(PathBuf, Debt)> = {
                let mut owing = self.owed.lock();
                let dirs: Vec<PathBuf> = owing
                    .debts
                    .iter()
                    .filter(|(_, debt)| debt.oldest < limit)
                    .map(|(dir, _)| dir.clone())
                    .take(SLICE)
                    .collect();
                dirs.into_iter()
                    .filter_map(|dir| owing.take(&dir).map(|debt| (dir, debt)))
                    .collect()
            };
            if slice.is_empty() {
                return Ok(());
            }
            self.write_slice(slice)?;
        }
    }

    /// Writes a slice of debts (the caller holds the writers' lock) with up to [`WRITERS`]
    /// threads: the folders are distinct, and what bounds these writes is the file system's
    /// creation of folders and files, which several threads get through faster. Scoped threads,
    /// not the file kit's I/O pool, whose threads may themselves be waiting for this lock.
    fn write_slice(&self, slice: Vec<(PathBuf, Debt)>) -> Result<(), StoreError> {
        let chunk = slice.len().div_ceil(WRITERS).max(1);
        let mut chunks: Vec<Vec<(PathBuf, Debt)>> = Vec::new();
        let mut slice = slice.into_iter().peekable();
        while slice.peek().is_some() {
            chunks.push(slice.by_ref().take(chunk).collect());
        }
        let results: Vec<Result<(), StoreError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| {
                    scope.spawn(move || {
                        let mut first_error = Ok(());
                        for (dir, debt) in chunk {
                            if first_error.is_err() {
                                self.owed.lock().done(&dir, Some(debt));
                                continue;
                            }
                            first_error = self.write(&dir, debt);
                        }
                        first_error
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| match handle.join() {
                    Ok(result) => result,
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        });
        results.into_iter().collect()
    }

    /// Drops every debt of a folder at or under `dir` (absolute), which is being removed: its
    /// removal is journaled, so no replay writes them back either.
    pub(crate) fn discard_under(&self, dir: &Path) {
        let _writing = self.writing.lock();
        let mut owing = self.owed.lock();
        let gone: Vec<PathBuf> = owing
            .debts
            .keys()
            .filter(|owed| owed.starts_with(dir))
            .cloned()
            .collect();
        for owed in gone {
            owing.take(&owed);
            owing.done(&owed, None);
        }
    }

    /// Whether any folder at or under `dir` (absolute) is owed something.
    #[cfg(test)]
    fn owes_under(&self, dir: &Path) -> bool {
        self.owed
            .lock()
            .debts
            .keys()
            .any(|owed| owed.starts_with(dir))
    }

    /// Writes a debt taken out of the map (the caller holds the writers' lock); on failure it is
    /// put back, so that readers of the folder get the error too.
    fn write(&self, dir: &Path, debt: Debt) -> Result<(), StoreError> {
        let written = write_debt(&self.root, dir, &debt);
        let unwritten = written.is_err().then_some(debt);
        self.owed.lock().done(dir, unwritten);
        written
    }
}

/// Writes one session folder's debt: its folders if new, its log runs at their offsets, then
/// its head. Nothing is flushed (the segment's checkpoint does). Bytes past the end this store
/// acknowledged (an unfinished append that appeared behind its back) are cut off first, a copy
/// kept beside the log; a log shorter than that end lost acknowledged bytes: `Corrupt`,
/// nothing written.
fn write_debt(root: &Path, dir: &Path, debt: &Debt) -> Result<(), StoreError> {
    let (log, head) = (dir.join(LOG_FILE), dir.join(HEAD_FILE));
    refuse_links(root, &[&log, &head])?;
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(io_error("create folder", dir))?;
    }
    if let Some(first) = debt.log.first().map(|run| &run.at) {
        let (file, len) = open_in_place(&log)?;
        if len > *first && !holds_own_bytes(&file, *first, len, &debt.log) {
            keep_cut(&log, *first, &dir.display())?;
            file.set_len(*first)
                .map_err(io_error("truncate the unfinished append in", &log))?;
        } else if len < *first {
            return Err(StoreError::Corrupt {
                key: dir.display().to_string(),
                detail: format!(
                    "{}: the log is {len} bytes, but {first} were acknowledged; acknowledged \
                     events are missing (the log was changed behind the store's back)",
                    log.display()
                ),
            });
        }
        for run in &debt.log {
            write_all_vectored_at(&file, &run.pieces, run.at)
                .map_err(io_error("append to", &log))?;
        }
    }
    if let Some(bytes) = &debt.head {
        replace_unflushed(&head, bytes)?;
    }
    Ok(())
}

/// Whether the log's bytes from `first` to `len` are the start of the runs about to be
/// written there: left by an earlier try at this debt that failed part-way, not by anyone else.
fn holds_own_bytes(file: &std::fs::File, first: u64, len: u64, runs: &[Run]) -> bool {
    let mut expected = Vec::new();
    for run in runs {
        if run.at != first + expected.len() as u64 {
            break;
        }
        expected.extend_from_slice(&run.joined());
    }
    let Ok(found_len) = usize::try_from(len - first) else {
        return false;
    };
    if found_len > expected.len() {
        return false;
    }
    let mut found = vec![0; found_len];
    file.read_exact_at(&mut found, first).is_ok() && found == expected[..found_len]
}

/// Writes `pieces` one after another from offset `at`, as few system calls as the kernel
/// allows (a vectored write takes at most `IOV_MAX` buffers, and may write less than asked).
fn write_all_vectored_at(
    file: &std::fs::File,
    pieces: &[Vec<u8>],
    mut at: u64,
) -> std::io::Result<()> {
    /// Linux's `IOV_MAX`.
    const MOST_BUFFERS: usize = 1024;
    let mut slices: Vec<IoSlice<'_>> = pieces.iter().map(|piece| IoSlice::new(piece)).collect();
    let mut slices = &mut slices[..];
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        let most = slices.len().min(MOST_BUFFERS);
        let written = match rustix::io::pwritev(file, &slices[..most], at) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => written,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        at += written as u64;
        IoSlice::advance_slices(&mut slices, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
