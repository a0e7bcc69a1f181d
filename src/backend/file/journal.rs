//! The file store's write-ahead journal: one `fdatasync` makes any number of sessions' appends
//! durable together (group commit).
//!
//! A session's append is written to its own log (into the page cache, no flush), then handed to
//! the journal as an [`Entry`]; the caller is acknowledged once the flush that covers the entry
//! returned. One committer thread takes whatever entries wait, writes them as one batch at the
//! end of the current segment (`<root>/journal/<n>.wal`) and flushes it; entries that arrive
//! meanwhile wait for the next flush, so the number of flushes per second stays near what one
//! thread can do while the appends they cover grow with the load.
//!
//! The session files stay the store's data; the journal only repeats what they may not yet hold
//! durably. Once a segment passes [`SEGMENT_BYTES`] the committer starts the next one, and a
//! checkpointer thread flushes every file the old segment touched (and their folders), then
//! deletes it. On open, what segments remain are replayed onto the files (each append is written
//! again where the file does not already hold it), the files flushed and the segments deleted;
//! a clean close checkpoints the last segment, so a stopped store's folder holds its sessions
//! whole, with no journal. `docs/stores.md` ("Group commit") gives the argument in full.
//!
//! A failed write or flush of the journal, or of a file at a checkpoint, stops the journal: every
//! later write is refused (`Unavailable`, saying why) until the store is opened again, which
//! replays what the journal holds. After a failed flush the page cache can no longer be trusted
//! to hold what it was given, so carrying on could acknowledge writes that never reach the disk.

mod format;
mod replay;

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

pub(crate) use self::format::Entry;
use self::format::{frame_batch, BATCH_FRAME, MAX_PAYLOAD, SEGMENT_HEADER};
use super::fsio::{create_dirs, io_error, replace_unflushed, sync_dir};
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
    /// The entry's encoding; empty for a barrier.
    encoded: Vec<u8>,
    touched: Option<PathBuf>,
    /// A replacement the committer writes to its file once the flush covers it.
    replace: Option<(PathBuf, Vec<u8>)>,
    /// A barrier: answered once every entry before it is checkpointed (in the files, flushed,
    /// and out of the journal).
    barrier: bool,
    done: oneshot::Sender<Result<(), StoreError>>,
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
        let mut encoded = Vec::new();
        entry.encode(&mut encoded).map_err(|detail| {
            StoreError::InvalidRequest(format!("cannot journal this write: {detail}"))
        })?;
        if encoded.len() > MAX_PAYLOAD as usize {
            return Err(StoreError::InvalidRequest(format!(
                "a write of {} bytes is larger than the file store's journal takes ({MAX_PAYLOAD} bytes)",
                encoded.len()
            )));
        }
        let touched = entry.touched().map(Path::to_owned);
        let replace = match entry {
            Entry::Replace { path, bytes } => Some((path, bytes)),
            Entry::Append { .. } | Entry::Remove { .. } => None,
        };
        self.enqueue(Waiting {
            encoded,
            touched,
            replace,
            barrier: false,
            done: oneshot::channel().0,
        })
        .await
    }

    /// Returns once every entry committed before the call is checkpointed: in its file, flushed,
    /// and out of the journal, so that no replay will ever apply it again. A removal needs this
    /// when files it removed are written again without the journal (a user's `user.json`).
    pub(crate) async fn checkpoint(&self) -> Result<(), StoreError> {
        self.enqueue(Waiting {
            encoded: Vec::new(),
            touched: None,
            replace: None,
            barrier: true,
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

    async fn enqueue(&self, mut waiting: Waiting) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        waiting.done = done;
        {
            let mut queue = self.shared.queue.lock();
            if let Some(reason) = &queue.stopped {
                return Err(stopped(reason));
            }
            queue.waiting.push(waiting);
        }
        self.shared.ready.notify_one();
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable {
                backend: "file",
                detail: "the journal stopped before it flushed this write".to_owned(),
            })
        })
    }
}

impl Journal {
    /// How many flushes the journal made so far: with [`Journal::commit`]s counted by the
    /// caller, how many writes a flush covered.
    #[cfg(test)]
    pub(crate) fn flushes(&self) -> u64 {
        self.shared.flushes.load(Ordering::Relaxed)
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
        tracing::error!(%reason, "the file store's journal stopped taking writes");
        let mut queue = self.queue.lock();
        queue.stopped.get_or_insert(reason);
    }

    fn stopped(&self) -> Option<String> {
        self.queue.lock().stopped.clone()
    }
}

/// The segment being written.
struct Segment {
    file: File,
    path: PathBuf,
    number: u64,
    len: u64,
}

impl Segment {
    /// Creates segment `number`, its header flushed and its folder entry durable.
    fn create(dir: &Path, number: u64) -> Result<Self, StoreError> {
        let path = dir.join(format!("{number:016}.wal"));
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_error("create", &path))?;
        let started = file
            .write_all(SEGMENT_HEADER)
            .and_then(|()| file.sync_data())
            .map_err(io_error("write", &path))
            .and_then(|()| sync_dir(dir));
        if let Err(e) = started {
            // Best effort, so that the next attempt can make it again.
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(Self {
            file,
            path,
            number,
            len: SEGMENT_HEADER.len() as u64,
        })
    }
}

/// A closed segment and the files it touched, for the checkpointer.
struct Checkpoint {
    segment: PathBuf,
    touched: HashSet<PathBuf>,
    /// Barriers to answer once it is done.
    barriers: Vec<oneshot::Sender<Result<(), StoreError>>>,
}

/// The committer thread's state.
struct Committer {
    shared: Arc<Shared>,
    root: PathBuf,
    dir: PathBuf,
    segment: Segment,
    segment_bytes: u64,
    /// Files the current segment's entries touched (relative to the root).
    dirty: HashSet<PathBuf>,
    /// `None` once closed (the checkpointer then finishes and exits).
    checkpoints: Option<mpsc::SyncSender<Checkpoint>>,
    checkpointer: Option<JoinHandle<()>>,
}

impl Committer {
    fn run(mut self) {
        let _stop_on_panic = StopOnPanic(self.shared.clone());
        while let Some(batch) = self.next_batch() {
            self.commit(batch);
        }
        self.close();
    }

    /// Waits for entries and takes a batch of them (up to [`BATCH_BYTES`], at least one);
    /// `None` once the journal closes with nothing left to write.
    fn next_batch(&self) -> Option<Vec<Waiting>> {
        let mut queue = self.shared.queue.lock();
        while queue.waiting.is_empty() && !queue.closing {
            self.shared.ready.wait(&mut queue);
        }
        if queue.waiting.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let take = queue
            .waiting
            .iter()
            .take_while(|w| {
                let first = bytes == 0;
                bytes += w.encoded.len();
                first || bytes <= BATCH_BYTES
            })
            .count();
        Some(queue.waiting.drain(..take).collect())
    }

    /// Writes one batch and flushes it, writes its replacements to their files, then answers
    /// its callers; barriers close the segment and are answered by its checkpoint.
    fn commit(&mut self, batch: Vec<Waiting>) {
        if let Some(reason) = self.shared.stopped() {
            for waiting in batch {
                let _ = waiting.done.send(Err(stopped(&reason)));
            }
            return;
        }
        let (barriers, batch): (Vec<Waiting>, Vec<Waiting>) =
            batch.into_iter().partition(|w| w.barrier);
        if !batch.is_empty() && !self.flush(batch) {
            for barrier in barriers {
                let _ = barrier
                    .done
                    .send(Err(stopped(&self.shared.stopped().unwrap_or_default())));
            }
            return;
        }
        if self.segment.len >= self.segment_bytes || !barriers.is_empty() {
            self.rotate(barriers.into_iter().map(|b| b.done).collect());
        }
    }

    /// Writes and flushes `batch`, writes its replacements, answers it; false if the journal
    /// stopped.
    fn flush(&mut self, batch: Vec<Waiting>) -> bool {
        let payload_len: usize = batch.iter().map(|w| w.encoded.len()).sum();
        let mut framed = Vec::with_capacity(BATCH_FRAME + payload_len);
        {
            let mut payload = Vec::with_capacity(payload_len);
            for waiting in &batch {
                payload.extend_from_slice(&waiting.encoded);
            }
            frame_batch(&payload, &mut framed);
        }
        let written = self
            .segment
            .file
            .write_all(&framed)
            .and_then(|()| self.segment.file.sync_data());
        if let Err(e) = written {
            let reason = format!(
                "writing or flushing {} failed: {e}",
                self.segment.path.display()
            );
            self.shared.stop(reason.clone());
            for waiting in batch {
                let _ = waiting.done.send(Err(stopped(&reason)));
            }
            return false;
        }
        self.segment.len += framed.len() as u64;
        self.shared.flushes.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("turnstile_file_journal_flushes_total").increment(1);
        metrics::counter!("turnstile_file_journal_writes_total").increment(batch.len() as u64);
        let mut healthy = true;
        for waiting in batch {
            if let Some(path) = waiting.touched {
                self.dirty.insert(path);
            }
            let answer = match &waiting.replace {
                Some((path, bytes)) => self.replace(path, bytes),
                None => Ok(()),
            };
            if let Err(e) = &answer {
                // Durable in the journal, not in its file: a reopen's replay writes it. Until
                // then the file would contradict what this process acknowledged.
                self.shared
                    .stop(format!("writing a journaled replacement failed: {e}"));
                healthy = false;
            }
            // A caller that stopped waiting is fine: its write is durable all the same.
            let _ = waiting.done.send(answer);
        }
        healthy
    }

    /// Writes a journaled replacement to its file (not flushed: the segment's checkpoint does).
    fn replace(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let full = self.root.join(path);
        if let Some(parent) = full.parent() {
            if !parent.exists() {
                std::fs::create_dir_all(parent).map_err(io_error("create folder", parent))?;
            }
        }
        replace_unflushed(&full, bytes)
    }

    /// Starts the next segment and hands the full one to the checkpointer (waiting while it is
    /// still busy with one and another waits: see [`SEGMENT_BYTES`] for the most segments).
    fn rotate(&mut self, barriers: Vec<oneshot::Sender<Result<(), StoreError>>>) {
        let next = match Segment::create(&self.dir, self.segment.number + 1) {
            Ok(next) => next,
            Err(e) => {
                // The full segment stays current: writes go on into it, and the next batch tries
                // again.
                tracing::warn!(error = %e, "could not start the journal's next segment");
                for barrier in barriers {
                    let _ = barrier.send(Err(StoreError::Unavailable {
                        backend: "file",
                        detail: format!("could not start the journal's next segment: {e}"),
                    }));
                }
                return;
            }
        };
        let full = std::mem::replace(&mut self.segment, next);
        let checkpoint = Checkpoint {
            segment: full.path,
            touched: std::mem::take(&mut self.dirty),
            barriers,
        };
        if let Some(checkpoints) = &self.checkpoints {
            // The checkpointer only exits once this sender is dropped.
            let _ = checkpoints.send(checkpoint);
        }
    }

    /// After the last batch: checkpoints the current segment (unless the journal stopped, when
    /// every segment stays for the next open to replay) and waits for the checkpointer.
    fn close(mut self) {
        if self.shared.stopped().is_none() {
            let last = Checkpoint {
                segment: self.segment.path.clone(),
                touched: std::mem::take(&mut self.dirty),
                barriers: Vec::new(),
            };
            if let Some(checkpoints) = &self.checkpoints {
                let _ = checkpoints.send(last);
            }
        }
        self.checkpoints = None;
        if let Some(checkpointer) = self.checkpointer.take() {
            let _ = checkpointer.join();
        }
    }
}

/// The checkpointer thread: checkpoints each closed segment in turn, and stops the journal if one
/// fails (that segment then stays, for the next open to replay).
fn run_checkpoints(shared: Arc<Shared>, root: &Path, pending: &mpsc::Receiver<Checkpoint>) {
    let _stop_on_panic = StopOnPanic(shared.clone());
    for checkpoint in pending {
        let refused = match shared.stopped() {
            Some(reason) => Some(reason),
            None => checkpoint_segment(root, &checkpoint).err().map(|e| {
                let reason = format!(
                    "the checkpoint of {} failed: {e}",
                    checkpoint.segment.display()
                );
                shared.stop(reason.clone());
                reason
            }),
        };
        for barrier in checkpoint.barriers {
            let _ = barrier.send(match &refused {
                Some(reason) => Err(stopped(reason)),
                None => Ok(()),
            });
        }
    }
}

/// Stops the journal when the thread holding it panics, and drops what waits for a flush, so
/// that callers get an error instead of waiting for ever.
struct StopOnPanic(Arc<Shared>);

impl Drop for StopOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop("the journal's thread panicked".to_owned());
            let waiting = std::mem::take(&mut self.0.queue.lock().waiting);
            drop(waiting);
        }
    }
}

/// Flushes every file `checkpoint` touched and the folders on their paths, then deletes its
/// segment: what the segment repeated is durable in the files themselves.
fn checkpoint_segment(root: &Path, checkpoint: &Checkpoint) -> Result<(), StoreError> {
    replay::flush_files(root, checkpoint.touched.iter().map(PathBuf::as_path))?;
    std::fs::remove_file(&checkpoint.segment).map_err(io_error("remove", &checkpoint.segment))?;
    match checkpoint.segment.parent() {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
