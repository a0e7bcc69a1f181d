//! The file store's write-ahead journal: one `fdatasync` makes any number of sessions' appends
//! durable together (group commit).
//!
//! A session's append is handed to the journal as an [`Entry`] ([`Journal::commit_behind`]);
//! the caller is acknowledged once the flush that covers the entry returned, and the session's
//! log is written later, behind the journal, many appends in one write (`behind.rs`). One committer thread takes whatever entries wait, writes them as one batch at the
//! end of the current segment (`<root>/journal/<n>.wal`) and flushes it; entries that arrive
//! meanwhile wait for the next flush, so the number of flushes per second stays near what one
//! thread can do while the appends they cover grow with the load.
//!
//! The session files stay the store's data; the journal only repeats what they may not yet hold
//! durably. Once a segment passes [`SEGMENT_BYTES`] the committer starts the next one, and a
//! checkpointer thread writes what the journal owes the files, flushes every file the old
//! segment touched (and their folders), then
//! deletes it. On open, what segments remain are replayed onto the files (each append is written
//! again where the file does not already hold it), the files flushed and the segments deleted;
//! a clean close checkpoints the last segment, so a stopped store's folder holds its sessions
//! whole, with no journal. `docs/stores.md` ("Group commit") gives the argument in full.
//!
//! A failed write or flush of the journal, or of a file at a checkpoint, stops the journal: every
//! later write is refused (`Unavailable`, saying why) until the store is opened again, which
//! replays what the journal holds. After a failed flush the page cache can no longer be trusted
//! to hold what it was given, so carrying on could acknowledge writes that never reach the disk.

mod behind;
mod format;
mod replay;
mod threads;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

use self::behind::Behind;
pub(crate) use self::behind::Owed;
pub(crate) use self::format::Entry;
use self::format::MAX_PAYLOAD;
use self::threads::{run_checkpoints, Checkpoint, Committer, Segment};
use super::fsio::{create_dirs, io_error, sync_dir};
use crate::store::StoreError;

/// The journal's folder under the root.
pub(crate) const JOURNAL_DIR: &str = "journal";

/// A segment is closed, and handed to a checkpoint, once it holds this many bytes.
///
/// Bounds what a restart after a crash replays (at most four segments: the current one, one
/// being checkpointed, one waiting for it and the next, made just before a hand-over waits) and
/// what a checkpoint flushes at once.
pub(crate) const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// A batch takes waiting entries up to this many bytes (an entry larger than this is a batch on
/// its own), so that one flush's latency stays bounded under a burst of large appends.
const BATCH_BYTES: usize = 8 * 1024 * 1024;

/// The write-ahead journal of one store root; see the module docs. Dropping it stops its threads
/// after the entries already handed to it are flushed, and checkpoints.
#[derive(Debug)]
pub(crate) struct Journal {
    shared: Arc<Shared>,
    committer: Option<JoinHandle<()>>,
}

/// What callers and the committer share.
#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when an entry is queued or the journal closes.
    ready: Condvar,
    /// Flushes made so far.
    flushes: AtomicU64,
    /// Session writes made durable here and not yet in their files; see `behind.rs`.
    behind: Behind,
    /// Set when the debts pass [`OWED_BYTES`]: the checkpoint thread writes them at its next
    /// look ([`LOOK_EVERY`]).
    owe_much: AtomicBool,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<Waiting>,
    closing: bool,
    /// Why the journal stopped taking writes, once it has.
    stopped: Option<String>,
}

/// An entry waiting for its flush, or a barrier.
#[derive(Debug)]
struct Waiting {
    /// The entry's header line; empty for a barrier. In the journal it is followed by the
    /// entry's bytes, taken from where they already are ([`Waiting::bytes`]): the committer's
    /// batch is the only copy made of them.
    header: Vec<u8>,
    job: Job,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// What a waiting entry is, and what the committer does with it once the flush covers it.
#[derive(Debug)]
enum Job {
    /// An entry given to [`Journal::commit`]: a replacement is written to its file.
    Entry(Entry),
    /// A session write, handed to be written behind (`behind.rs`).
    Behind(PathBuf, Owed),
    /// Answered once every entry before it is checkpointed (in the files, flushed, and out of
    /// the journal).
    Barrier,
}

impl Journal {
    /// Replays what a previous run left in `<root>/journal` onto the files (see the module docs),
    /// then starts an empty journal. Blocking: call it where [`super::FileStore::open`] runs.
    pub(crate) fn open(root: &Path) -> Result<Self, StoreError> {
        Self::open_with(root, SEGMENT_BYTES)
    }

    /// [`Journal::open`] with segments closed past `segment_bytes` (small in tests, to
    /// exercise checkpoints).
    pub(crate) fn open_with(root: &Path, segment_bytes: u64) -> Result<Self, StoreError> {
        let dir = root.join(JOURNAL_DIR);
        create_dirs(std::slice::from_ref(&dir))?;
        let found = replay::segments(&dir)?;
        if !found.is_empty() {
            // The last run did not close cleanly: the page cache may still hold its writes that
            // no journal entry covers (an append written to its log, then the process killed
            // before the journal's flush). Reads would take them for durable and build on them,
            // so flush them now, with everything else on this file system.
            replay::flush_file_system(root)?;
        }
        replay::replay(root, &found)?;
        // Oldest first, each removal durable before the next: an older segment (a removal in
        // it) must never outlive a newer one.
        for (_, path) in &found {
            std::fs::remove_file(path).map_err(io_error("remove", path))?;
            sync_dir(&dir)?;
        }
        let next = found.last().map_or(1, |(n, _)| n + 1);
        let segment = Segment::create(&dir, next)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            flushes: AtomicU64::new(0),
            behind: Behind::new(root),
            owe_much: AtomicBool::new(false),
        });
        let (checkpoints, pending) = mpsc::sync_channel::<Checkpoint>(1);
        let checkpointer = {
            let (shared, root) = (shared.clone(), root.to_owned());
            std::thread::Builder::new()
                .name("turnstile-journal-checkpoint".into())
                .spawn(move || run_checkpoints(shared, &root, &pending))
                .map_err(io_error("start the journal's checkpoint thread in", &dir))?
        };
        let committer = Committer {
            shared: shared.clone(),
            root: root.to_owned(),
            dir: dir.clone(),
            segment,
            segment_bytes,
            dirty: HashSet::new(),
            checkpoints: Some(checkpoints),
            checkpointer: Some(checkpointer),
            framed: Vec::new(),
        };
        let committer = std::thread::Builder::new()
            .name("turnstile-journal".into())
            .spawn(move || committer.run())
            .map_err(io_error("start the journal's thread in", &dir))?;
        Ok(Self {
            shared,
            committer: Some(committer),
        })
    }

    /// Makes `entry` durable: returns once a flush of the journal covers it. The change an
    /// append or a removal describes must already be made (flushed or not); a replacement is
    /// written to its file by the journal itself, after the flush and before this returns, so
    /// that no checkpoint can flush the file before its new content is there.
    pub(crate) async fn commit(&self, entry: Entry) -> Result<(), StoreError> {
        self.enqueue(Waiting {
            header: encode_header(&entry)?,
            job: Job::Entry(entry),
            done: oneshot::channel().0,
        })
        .await
    }

    /// Makes a session's appends or head durable like [`Journal::commit`], but leaves the
    /// files to be written behind (see `behind.rs`): nothing is written to them before this
    /// call, and once it returns, a reader of them must [`Journal::settle`] their folder first.
    /// The entries are queued together (so that one flush usually covers them all) and in
    /// order: an entry's answer being `Ok` means every entry before it is durable too. Returns
    /// each entry's answer, in order, up to the first that could not be queued.
    pub(crate) async fn commit_behind(&self, entries: Vec<Entry>) -> Vec<Result<(), StoreError>> {
        let mut queued = Vec::with_capacity(entries.len());
        for entry in entries {
            let waiting = encode_header(&entry).and_then(|header| {
                let job = match entry {
                    Entry::Append { path, at, bytes } => Job::Behind(path, Owed::Log { at, bytes }),
                    Entry::Replace { path, bytes } => Job::Behind(path, Owed::Head(bytes)),
                    Entry::Remove { .. } => {
                        return Err(StoreError::InvalidRequest(
                            "a removal cannot be written behind".to_owned(),
                        ))
                    }
                };
                Ok(Waiting {
                    header,
                    job,
                    done: oneshot::channel().0,
                })
            });
            match waiting {
                Ok(waiting) => queued.push(waiting),
                // Entries after a refused one are not queued: each depends on those before it.
                Err(e) => {
                    let mut answers = self.enqueue_all(queued).await;
                    answers.push(Err(e));
                    return answers;
                }
            }
        }
        self.enqueue_all(queued).await
    }

    /// Writes what the session folder `dir` (absolute) is owed, so that its files hold every
    /// write committed behind before the call. Blocking. A failure stops the journal.
    pub(crate) fn settle(&self, dir: &Path) -> Result<(), StoreError> {
        self.shared
            .behind
            .settle(dir)
            .inspect_err(|e| self.shared.behind_failed(e))
    }

    /// [`Journal::settle`] for every folder: before a walk of the root's folders.
    pub(crate) fn settle_all(&self) -> Result<(), StoreError> {
        self.shared
            .behind
            .settle_all()
            .inspect_err(|e| self.shared.behind_failed(e))
    }

    /// Drops what folders at or under `dir` are owed: once the journal holds their removal.
    pub(crate) fn discard_under(&self, dir: &Path) {
        self.shared.behind.discard_under(dir);
    }

    /// Returns once every entry committed before the call is checkpointed: in its file, flushed,
    /// and out of the journal, so that no replay will ever apply it again. A removal needs this
    /// when files it removed are written again without the journal (a user's `user.json`).
    pub(crate) async fn checkpoint(&self) -> Result<(), StoreError> {
        self.enqueue(Waiting {
            header: Vec::new(),
            job: Job::Barrier,
            done: oneshot::channel().0,
        })
        .await
    }

    /// Stops the journal for `reason`: every later write is refused until the store is opened
    /// again (which replays it).
    pub(crate) fn halt(&self, reason: String) {
        self.shared.stop(reason);
    }

    /// Why the journal takes no writes, if it stopped.
    pub(crate) fn refusal(&self) -> Option<StoreError> {
        self.shared.stopped().map(|reason| stopped(&reason))
    }

    async fn enqueue(&self, waiting: Waiting) -> Result<(), StoreError> {
        let mut answers = self.enqueue_all(vec![waiting]).await;
        answers.pop().unwrap_or_else(|| Err(unanswered()))
    }

    /// Queues `waiting` together, in order, and returns each one's answer once it has them all.
    async fn enqueue_all(&self, waiting: Vec<Waiting>) -> Vec<Result<(), StoreError>> {
        let mut answers = Vec::with_capacity(waiting.len());
        {
            let mut queue = self.shared.queue.lock();
            if let Some(reason) = &queue.stopped {
                return waiting.iter().map(|_| Err(stopped(reason))).collect();
            }
            for mut waiting in waiting {
                let (done, answer) = oneshot::channel();
                waiting.done = done;
                queue.waiting.push(waiting);
                answers.push(answer);
            }
        }
        self.shared.ready.notify_one();
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            results.push(answer.await.unwrap_or_else(|_| {
                Err(StoreError::Unavailable {
                    backend: "file",
                    detail: "the journal stopped before it flushed this write".to_owned(),
                })
            }));
        }
        results
    }
}

impl Journal {
    /// How many flushes the journal made so far: with [`Journal::commit`]s counted by the
    /// caller, how many writes a flush covered.
    #[cfg(test)]
    pub(crate) fn flushes(&self) -> u64 {
        self.shared
            .flushes
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.shared.queue.lock().closing = true;
        self.shared.ready.notify_all();
        if let Some(committer) = self.committer.take() {
            // A panic there has been reported already; the segments stay for the next open.
            let _ = committer.join();
        }
    }
}

/// The room reserved for a header line besides its path: the longest such line,
/// `{"op":"append","path":"","at":N,"len":N}` and its newline with both numbers at twenty digits,
/// is 79 bytes; the rest covers a path whose characters JSON would escape (the layout makes
/// none, so this is slack, not a limit: a longer line only grows its buffer).
const HEADER_ROOM: usize = 96;

/// An entry's header line, refused when the journal could not take the entry.
fn encode_header(entry: &Entry) -> Result<Vec<u8>, StoreError> {
    // Room for the line's fixed text and numbers besides the path, so that it is encoded
    // without growing the buffer.
    let mut header = Vec::with_capacity(HEADER_ROOM + entry.path().as_os_str().len());
    entry.encode_header(&mut header).map_err(|detail| {
        StoreError::InvalidRequest(format!("cannot journal this write: {detail}"))
    })?;
    let encoded = header.len() + entry.bytes().len();
    if encoded > MAX_PAYLOAD as usize {
        return Err(StoreError::InvalidRequest(format!(
            "a write of {encoded} bytes is larger than the file store's journal takes ({MAX_PAYLOAD} bytes)"
        )));
    }
    Ok(header)
}

impl Waiting {
    /// The bytes its encoding ends with, after its header.
    fn bytes(&self) -> &[u8] {
        match &self.job {
            Job::Entry(entry) => entry.bytes(),
            Job::Behind(_, owed) => owed.bytes(),
            Job::Barrier => &[],
        }
    }

    /// How long its encoding is.
    fn encoded_len(&self) -> usize {
        self.header.len() + self.bytes().len()
    }

    fn is_barrier(&self) -> bool {
        matches!(self.job, Job::Barrier)
    }
}

/// The error for a write the journal gave no answer for: one of [`Journal::commit_behind`]'s
/// entries after the first it refused (and, should it ever happen, a write
/// [`Journal::enqueue`] got no answer for at all).
pub(crate) fn unanswered() -> StoreError {
    StoreError::Unavailable {
        backend: "file",
        detail: "the journal did not take this write".to_owned(),
    }
}

/// The error for a write refused by a stopped journal.
fn stopped(reason: &str) -> StoreError {
    StoreError::Unavailable {
        backend: "file",
        detail: format!(
            "the journal stopped taking writes ({reason}); open the store again to replay it"
        ),
    }
}

impl Shared {
    /// Stops the journal for `reason` (the first reason given is kept).
    fn stop(&self, reason: String) {
        let mut queue = self.queue.lock();
        if queue.stopped.is_none() {
            tracing::error!(%reason, "the file store's journal stopped taking writes");
            queue.stopped = Some(reason);
        }
    }

    fn stopped(&self) -> Option<String> {
        self.queue.lock().stopped.clone()
    }

    /// Stops the journal after journaled writes could not be written behind to their files.
    fn behind_failed(&self, error: &StoreError) {
        self.stop(format!(
            "writing journaled session writes to their files failed: {error}"
        ));
    }

    /// Writes every debt, stopping the journal on a failure; false if it did.
    fn settle_all(&self) -> bool {
        match self.behind.settle_all() {
            Ok(()) => true,
            Err(e) => {
                self.behind_failed(&e);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests;
