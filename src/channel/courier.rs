//! The courier: runs the turn of each accepted platform message and writes its reply, streamed
//! by editing one message (more once it outgrows the platform's length limit) at a bounded rate
//! per chat.
//!
//! Messages of one chat are handed to the runtime in the order they were accepted (one queue
//! per chat), each as soon as the one before it is handed over, so that the chat's overlap
//! policy sees them as they came (a newer one supersedes a running turn under `latest`). Each
//! reply is then written by its own task.
//!
//! An entry is marked done only once its reply is written (or given up on); until then it stays
//! pending in the inbox, and the next start resumes it: the turn runs again with the same
//! request id (a stored turn is answered from the log), and the messages it posted are edited.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod gather;
mod pacer;
mod writer;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::gather::{
    resumed, session_of, turns, Queued, Turn, MAX_GATHERED, MAX_GATHERED_BYTES, MAX_PAUSES,
};
pub(crate) use self::gather::{Gather, Gathering};
use self::pacer::Pacer;
use self::writer::{failure_text, NotWritten, Writer};
use super::platform::Platform;
use super::{ChannelError, ChannelRouter, Inbox, InboxEntry};
use crate::call::{CallOptions, OverlapPolicy};
use crate::stream::TurnStream;
use crate::Error;

/// How often one chat's reply is edited while it streams, unless configured: about what
/// Telegram allows per chat, and well inside Slack's and Discord's limits.
pub const DEFAULT_EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// How many times a reply's final text is tried against a failing platform before the reply is
/// given up on (about a minute and a half with the backoff), and a turn the runtime could not
/// take for now (at capacity, store down) is tried again.
const ATTEMPTS: u32 = 6;

/// The first wait between attempts; doubled after each.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Runs the turns of one platform's accepted messages and writes their replies. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Courier {
    inner: Arc<Inner>,
}

struct Inner {
    router: ChannelRouter,
    inbox: Arc<dyn Inbox>,
    platform: Arc<dyn Platform>,
    /// The time between two API calls for one chat.
    interval: Duration,
    pacer: Pacer,
    /// Whether a chat's messages are gathered until it pauses (`debounce`, `burst`).
    gathering: Option<Gathering>,
    /// One turn at a time in a whole chat, threads included (`lock = "chat"`).
    chat_lock: bool,
    /// Per chat (its session key, or the chat's with a chat lock), the queue its messages are
    /// handed over from.
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<Queued>>>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl Courier {
    pub(crate) fn new(
        router: ChannelRouter,
        inbox: Arc<dyn Inbox>,
        platform: Arc<dyn Platform>,
        interval: Duration,
        gathering: Option<Gathering>,
        chat_lock: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                router,
                inbox,
                platform,
                interval,
                gathering,
                chat_lock,
                pacer: Pacer::default(),
                queues: Mutex::default(),
                tasks: TaskTracker::new(),
                stop: CancellationToken::new(),
            }),
        }
    }

    pub(crate) fn platform(&self) -> &Arc<dyn Platform> {
        &self.inner.platform
    }

    /// The time between two API calls for one chat.
    fn interval(&self) -> Duration {
        self.inner.interval
    }

    fn pacer(&self) -> &Pacer {
        &self.inner.pacer
    }

    pub(crate) fn inbox(&self) -> &Arc<dyn Inbox> {
        &self.inner.inbox
    }

    pub(crate) fn stop_token(&self) -> &CancellationToken {
        &self.inner.stop
    }

    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// Answers the entries the inbox still holds from before (oldest first), gathered into the
    /// turns they were gathered into before.
    pub(crate) async fn resume(&self) -> Result<usize, super::InboxError> {
        let pending = self
            .inner
            .inbox
            .pending(self.inner.platform.channel())
            .await?;
        let count = pending.len();
        let (queued, settled) = resumed(pending);
        for entry in settled {
            // Gathered into a turn that was answered: answered with it.
            self.mark_done(entry).await;
        }
        for item in queued {
            self.enqueue_item(item);
        }
        Ok(count)
    }

    /// Hands `entry` (accepted, durable) to its chat's queue.
    pub(crate) fn enqueue(&self, entry: InboxEntry) {
        self.enqueue_item(Queued::Fresh(entry));
    }

    fn enqueue_item(&self, item: Queued) {
        if self.inner.stop.is_cancelled() {
            // Left pending: the next start answers it.
            return;
        }
        let chat = self.queue_of(match &item {
            Queued::Fresh(entry) => entry,
            Queued::Formed(turn) => &turn.last,
        });
        let mut queues = self.inner.queues.lock();
        if let Some(queue) = queues.get(&chat) {
            match queue.send(item) {
                Ok(()) => return,
                // The worker is gone (it only leaves under this lock with its queue removed,
                // so this is a stopped courier): a new one takes the entry.
                Err(mpsc::error::SendError(back)) => {
                    return self.start_worker(&mut queues, chat, back)
                }
            }
        }
        self.start_worker(&mut queues, chat, item);
    }

    fn start_worker(
        &self,
        queues: &mut HashMap<String, mpsc::UnboundedSender<Queued>>,
        chat: String,
        first: Queued,
    ) {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        queue.send(first).expect("the receiver is held right here");
        queues.insert(chat.clone(), queue);
        let courier = self.clone();
        self.inner.tasks.spawn(async move {
            // An item taken from the queue while gathering that belongs to the next turn.
            let mut held = None;
            loop {
                let next = held.take().or_else(|| {
                    let mut queues = courier.inner.queues.lock();
                    match receiver.try_recv() {
                        Ok(item) => Some(item),
                        Err(_) => {
                            // Removed under the lock senders take: nothing is sent to a
                            // queue nobody reads.
                            queues.remove(&chat);
                            None
                        }
                    }
                });
                match next {
                    None => break,
                    Some(Queued::Formed(turn)) => courier.hand_over(turn).await,
                    Some(Queued::Fresh(first)) => {
                        let (gathered, next) = courier.gather(first, &mut receiver).await;
                        held = next;
                        for turn in turns(gathered) {
                            courier.record(&turn).await;
                            courier.hand_over(turn).await;
                        }
                    }
                }
            }
        });
    }

    /// The queue an entry waits in: its session's, or its chat's under a chat lock.
    fn queue_of(&self, entry: &InboxEntry) -> String {
        if self.inner.chat_lock {
            format!("{}|{}", entry.message.channel, entry.message.chat)
        } else {
            session_of(entry)
        }
    }

    /// `first` and the fresh messages that follow it into the same turns: when gathering, until
    /// the chat is quiet for the pause (at most [`MAX_GATHERED`] messages or
    /// [`MAX_GATHERED_BYTES`], at most [`MAX_PAUSES`] pauses after the first); under a chat
    /// lock with the `latest` policy, those already waiting (the newest of a session wins, the
    /// rest come before it in its history). A turn made before a restart met on the way stops
    /// the gathering and is handed back, to go next.
    async fn gather(
        &self,
        first: InboxEntry,
        receiver: &mut mpsc::UnboundedReceiver<Queued>,
    ) -> (Vec<InboxEntry>, Option<Queued>) {
        let mut bytes = first.message.input.len();
        let mut gathered = vec![first];
        let full = |gathered: &Vec<InboxEntry>, bytes: usize| {
            gathered.len() >= MAX_GATHERED || bytes >= MAX_GATHERED_BYTES
        };
        let Some(gathering) = self.inner.gathering else {
            if self.inner.chat_lock && self.inner.router.policy() == OverlapPolicy::Latest {
                while !full(&gathered, bytes) {
                    match receiver.try_recv() {
                        Ok(Queued::Fresh(entry)) => {
                            bytes += entry.message.input.len();
                            gathered.push(entry);
                        }
                        Ok(formed) => return (gathered, Some(formed)),
                        Err(_) => break,
                    }
                }
            }
            return (gathered, None);
        };
        let latest = tokio::time::Instant::now() + gathering.pause * MAX_PAUSES;
        while !full(&gathered, bytes) {
            let until = (tokio::time::Instant::now() + gathering.pause).min(latest);
            tokio::select! {
                next = tokio::time::timeout_at(until, receiver.recv()) => match next {
                    Ok(Some(Queued::Fresh(entry))) => {
                        bytes += entry.message.input.len();
                        gathered.push(entry);
                    }
                    Ok(Some(formed)) => return (gathered, Some(formed)),
                    // Quiet for the pause (or the senders are gone): answer what came.
                    _ => break,
                },
                // Left pending: the next start gathers them again.
                () = self.inner.stop.cancelled() => return (Vec::new(), None),
            }
        }
        (gathered, None)
    }

    /// Keeps, in each entry gathered into `turn` before its last, which entry answers it, so
    /// that a restart makes the same turn of them. Tried again while the inbox fails; past
    /// that the turn goes on, and a restart might gather its entries differently.
    async fn record(&self, turn: &Turn) {
        for entry in &turn.earlier {
            let mut entry = entry.clone();
            entry.answered_by = Some(turn.last.id.clone());
            for attempt in 1..=ATTEMPTS {
                match self.inner.inbox.update(&entry).await {
                    Ok(()) => break,
                    Err(e) if attempt == ATTEMPTS => {
                        tracing::error!(channel = self.inner.platform.channel(), error = %e,
                            "which turn answers a gathered message could not be kept");
                    }
                    Err(_) => {
                        if self.pause(backoff(attempt)).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Hands one turn's message to the runtime, then writes its reply: in a task of its own,
    /// or before the next message is handed over under a chat lock.
    async fn hand_over(&self, turn: Turn) {
        let (message, earlier) = turn.message(self.inner.gathering.map(|g| g.kind));
        let mut attempt = 0;
        let stream = loop {
            attempt += 1;
            let options = CallOptions::default()
                .with_request_id(turn.last.request_id())
                .with_preceding(earlier.clone());
            let sent = tokio::select! {
                sent = self.inner.router.send_streaming(message.clone(), options) => sent,
                () = self.inner.stop.cancelled() => return,
            };
            match sent {
                Ok((_, stream)) => break Ok(stream),
                Err(ChannelError::Runtime(Error::Draining)) => return,
                Err(ChannelError::Runtime(e)) if retryable(&e) && attempt < ATTEMPTS => {
                    tracing::warn!(
                        channel = self.inner.platform.channel(),
                        code = e.code(),
                        attempt,
                        "a channel message could not be handed over; trying again"
                    );
                    if self.pause(backoff(attempt)).await.is_err() {
                        return;
                    }
                }
                Err(e) => break Err(e),
            }
        };
        let courier = self.clone();
        let replied = async move {
            tokio::select! {
                () = courier.reply(turn, stream) => {}
                // Left pending at a stop: the next start edits what was posted.
                () = courier.inner.stop.cancelled() => {}
            }
        };
        if self.inner.chat_lock {
            replied.await;
        } else {
            self.inner.tasks.spawn(replied);
        }
    }

    /// Waits `wait`, or fails when the courier stops meanwhile.
    async fn pause(&self, wait: Duration) -> Result<(), ()> {
        tokio::select! {
            () = tokio::time::sleep(wait) => Ok(()),
            () = self.inner.stop.cancelled() => Err(()),
        }
    }

    /// Streams the reply of a turn, then marks its entries done.
    async fn reply(&self, turn: Turn, stream: Result<TurnStream, ChannelError>) {
        let channel = self.inner.platform.channel();
        let Turn { last, earlier } = turn;
        let mut writer = Writer::new(self, last);
        let text = match stream {
            Ok(stream) => match writer.stream(stream).await {
                Some(text) => text,
                // The runtime is draining: the reply is written after the restart.
                None => return,
            },
            Err(e) => {
                tracing::warn!(channel, error = %e, "a channel message could not be answered");
                Some(failure_text(error_code(&e)))
            }
        };
        // A platform that was promised an answer (Discord's deferred response) gets a note
        // even when another message's reply answers this one.
        let text = text.or_else(|| self.inner.platform.unanswered_note().map(str::to_owned));
        let written = match text {
            Some(text) => writer.show(&text, true).await,
            None => Ok(()),
        };
        let result = match &written {
            Ok(()) => "sent",
            Err(NotWritten::Platform(_)) => "failed",
            Err(NotWritten::Unrecorded(_)) => "unrecorded",
        };
        metrics::counter!("turnstile_channel_replies_total", "channel" => channel, "result" => result)
            .increment(1);
        match written {
            Ok(()) => {}
            Err(e @ NotWritten::Platform(_)) => {
                tracing::error!(channel, error = %e, "a reply could not be written; given up");
            }
            Err(e @ NotWritten::Unrecorded(_)) => {
                // Left pending: the next start edits what was recorded and goes on from there.
                tracing::error!(channel, error = %e, "a reply stopped; it goes on after a restart");
                return;
            }
        }
        // The gathered ones first: should the process stop in between, the entry left pending
        // is the one whose request id finds the stored turn. A platform that promised each of
        // them an answer (Discord) gets its note.
        for entry in earlier {
            let entry = match self.inner.platform.unanswered_note() {
                Some(note) => {
                    let mut noted = Writer::new(self, entry);
                    if let Err(e) = noted.show(note, true).await {
                        tracing::warn!(channel, error = %e, "a gathered message's note failed");
                    }
                    noted.entry
                }
                None => entry,
            };
            self.mark_done(entry).await;
        }
        self.mark_done(writer.entry).await;
    }

    /// Marks `entry` done, trying again while the inbox fails; an entry that cannot be marked
    /// stays pending and its reply is shown again (the same text, by edits) after a restart.
    async fn mark_done(&self, mut entry: InboxEntry) {
        entry.done = true;
        for attempt in 1..=ATTEMPTS {
            match self.inner.inbox.update(&entry).await {
                Ok(()) => return,
                Err(e) if attempt == ATTEMPTS => {
                    tracing::error!(channel = self.inner.platform.channel(), error = %e,
                        "a written reply could not be marked done");
                }
                Err(_) => {
                    if self.pause(backoff(attempt)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// The code a failed hand-over is reported to the chat with.
fn error_code(error: &ChannelError) -> &'static str {
    match error {
        ChannelError::Runtime(e) => e.code(),
        ChannelError::Pairing(_) => "pairing_store",
        _ => "invalid_message",
    }
}

/// Whether the runtime may take the message a little later.
fn retryable(error: &Error) -> bool {
    matches!(
        error.code(),
        "overloaded"
            | "at_capacity"
            | "concurrency_limit_exceeded"
            | "store"
            | "activation"
            | "timeout"
            | "session_failed"
    )
}

fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF * 2u32.saturating_pow(attempt.saturating_sub(1).min(5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_stops_growing() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(20), Duration::from_secs(16));
    }
}
