//! The journal's two threads: the committer, which writes and flushes batches and answers their
//! callers, and the checkpointer, which writes what the journal owes the session files and
//! checkpoints closed segments.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use super::behind::{OWED_BYTES, OWED_BYTES_MAX, WRITE_AFTER};
use super::format::{frame_batch, Entry, BATCH_FRAME, SEGMENT_HEADER};
use super::{replay, stopped, Job, Shared, Waiting, BATCH_BYTES};
use crate::backend::file::fsio::{io_error, replace_unflushed, sync_dir};
use crate::store::StoreError;

/// A segment grows in steps of this many bytes, zero-filled, written right after the batch
/// that first needs them and flushed with it: a batch written over zeros the file already holds changes neither its size nor
/// its blocks, so its `fdatasync` writes the data alone, where one that extended the file would
/// also write the file's size and block map. On this project's ext4 test machine that is
/// 1.4-1.7 times the flushes per second (docs/BENCHMARKS.md); a segment ends up at most this
/// much larger than what it holds.
pub(super) const ROOM_BYTES: u64 = 256 * 1024;

/// What a step of room is written from: one static block of zeros, rather than a buffer
/// allocated and zeroed for each step (which cost the committer more than the rest of its work
/// on tmpfs: fresh pages from the allocator for every step).
static ROOM_ZEROS: [u8; ROOM_BYTES as usize] = [0; ROOM_BYTES as usize];

/// The committer keeps its batch buffer between batches while it is at most this large.
const KEEP_FRAMED: usize = 1024 * 1024;

/// The segment being written.
pub(super) struct Segment {
    file: File,
    path: PathBuf,
    number: u64,
    /// Where its batches end: the next one is written here.
    len: u64,
    /// How long the file is: its batches, then zeros ([`ROOM_BYTES`]).
    room_end: u64,
}

impl Segment {
    /// Creates segment `number`, its header flushed and its folder entry durable.
    pub(super) fn create(dir: &Path, number: u64) -> Result<Self, StoreError> {
        let path = dir.join(format!("{number:016}.wal"));
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
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
        let len = SEGMENT_HEADER.len() as u64;
        Ok(Self {
            file,
            path,
            number,
            len,
            room_end: len,
        })
    }
}

/// How often the checkpoint thread looks at the debts between checkpoints.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// A closed segment and the files it touched, for the checkpointer.
pub(super) struct Checkpoint {
    segment: PathBuf,
    touched: HashSet<PathBuf>,
    /// Barriers to answer once it is done.
    barriers: Vec<oneshot::Sender<Result<(), StoreError>>>,
}

/// The committer thread's state.
pub(super) struct Committer {
    pub(super) shared: Arc<Shared>,
    pub(super) root: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) segment: Segment,
    pub(super) segment_bytes: u64,
    /// Files the current segment's entries touched (relative to the root).
    pub(super) dirty: HashSet<PathBuf>,
    /// `None` once closed (the checkpointer then finishes and exits).
    pub(super) checkpoints: Option<mpsc::SyncSender<Checkpoint>>,
    pub(super) checkpointer: Option<JoinHandle<()>>,
    /// The buffer a batch is framed in, kept between batches (see [`KEEP_FRAMED`]).
    pub(super) framed: Vec<u8>,
}

impl Committer {
    pub(super) fn run(mut self) {
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
                bytes += w.encoded_len();
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
            if batch.iter().any(Waiting::is_barrier) {
                batch.into_iter().partition(Waiting::is_barrier)
            } else {
                (Vec::new(), batch)
            };
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
        let mut framed = std::mem::take(&mut self.framed);
        framed.clear();
        framed.reserve(BATCH_FRAME + batch.iter().map(Waiting::encoded_len).sum::<usize>());
        frame_batch(
            batch.iter().flat_map(|w| [w.header.as_slice(), w.bytes()]),
            &mut framed,
        );
        let (at, end) = (self.segment.len, self.segment.len + framed.len() as u64);
        // The batch outgrows the zeroed room: the next step of it is written right after the
        // batch, before the same flush.
        let room = if end > self.segment.room_end {
            &ROOM_ZEROS[..(end.next_multiple_of(ROOM_BYTES) - end) as usize]
        } else {
            &[][..]
        };
        let written = self
            .segment
            .file
            .write_all_at(&framed, at)
            .and_then(|()| self.segment.file.write_all_at(room, end))
            .and_then(|()| self.segment.file.sync_data());
        // Kept for the next batch, unless a burst made it large.
        if framed.capacity() <= KEEP_FRAMED {
            self.framed = framed;
        }
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
        self.segment.len = end;
        self.segment.room_end = self.segment.room_end.max(end + room.len() as u64);
        self.shared.flushes.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("turnstile_file_journal_flushes_total").increment(1);
        metrics::counter!("turnstile_file_journal_writes_total").increment(batch.len() as u64);
        let mut healthy = true;
        let mut owing = 0;
        for waiting in batch {
            let answer = match waiting.job {
                Job::Behind(path, owed) => {
                    owing = self.shared.behind.owe(&path, owed);
                    self.dirty.insert(path);
                    Ok(())
                }
                Job::Entry(Entry::Replace { path, bytes }) => {
                    let replaced = self.replace(&path, &bytes);
                    self.dirty.insert(path);
                    replaced
                }
                Job::Entry(Entry::Append { path, .. }) => {
                    self.dirty.insert(path);
                    Ok(())
                }
                Job::Entry(Entry::Remove { .. }) | Job::Barrier => Ok(()),
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
        if owing >= OWED_BYTES_MAX {
            // The checkpoint thread falls behind: write the debts here, which holds the next
            // batch back, so that what they cost in memory stays bounded.
            healthy &= self.shared.settle_all();
        } else if owing >= OWED_BYTES {
            self.shared.owe_much.store(true, Ordering::Relaxed);
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
pub(super) fn run_checkpoints(
    shared: Arc<Shared>,
    root: &Path,
    pending: &mpsc::Receiver<Checkpoint>,
) {
    let _stop_on_panic = StopOnPanic(shared.clone());
    loop {
        let checkpoint = match pending.recv_timeout(LOOK_EVERY) {
            Ok(checkpoint) => checkpoint,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Debts are written once they are many or old; after the journal stopped they
                // stay for the next open's replay (trying again would only fail again).
                let (bytes, waited) = shared.behind.owing();
                let due = shared.owe_much.swap(false, Ordering::Relaxed)
                    || waited.is_some_and(|waited| waited >= WRITE_AFTER);
                if bytes > 0 && due && shared.stopped().is_none() {
                    shared.settle_all();
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let refused = match shared.stopped() {
            Some(reason) => Some(reason),
            // What the segment holds is written to the files before they are flushed.
            None if !shared.settle_all() => shared.stopped(),
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
