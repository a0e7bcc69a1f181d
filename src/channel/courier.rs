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

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::platform::{split_reply, Platform, PlatformError, MAX_RETRY_AFTER};
use super::{ChannelError, ChannelRouter, Inbox, InboxEntry};
use crate::call::{CallOptions, OutcomeKind};
use crate::stream::{StreamEvent, TurnStream};
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

/// Most chats whose pacing is remembered: past it, chats whose next slot has passed are
/// forgotten (they have nothing to wait for).
const MAX_PACED_CHATS: usize = 10_000;

/// Spaces the API calls of each chat [`Courier::interval`] apart, and holds a chat for the wait
/// a platform's 429 asked for.
#[derive(Debug, Default)]
struct Pacer {
    next: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Waits for the chat's next slot and takes it.
    async fn take(&self, chat: &str, interval: Duration) {
        let slot = {
            let mut next = self.next.lock();
            let now = Instant::now();
            if next.len() >= MAX_PACED_CHATS {
                next.retain(|_, at| *at > now);
            }
            let slot = next
                .get(chat)
                .copied()
                .filter(|at| *at > now)
                .unwrap_or(now);
            next.insert(chat.to_owned(), slot + interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }

    /// Takes the chat's next slot if it is due now.
    fn try_take(&self, chat: &str, interval: Duration) -> bool {
        let mut next = self.next.lock();
        let now = Instant::now();
        if next.get(chat).is_some_and(|at| *at > now) {
            return false;
        }
        next.insert(chat.to_owned(), now + interval);
        true
    }

    /// Holds the chat until `until`.
    fn hold(&self, chat: &str, until: Instant) {
        let mut next = self.next.lock();
        let at = next.entry(chat.to_owned()).or_insert(until);
        *at = (*at).max(until);
    }
}

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
    /// Per chat (its session key), the queue its messages are handed over from.
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<InboxEntry>>>,
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl Courier {
    pub(crate) fn new(
        router: ChannelRouter,
        inbox: Arc<dyn Inbox>,
        platform: Arc<dyn Platform>,
        interval: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                router,
                inbox,
                platform,
                interval,
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

    pub(crate) fn inbox(&self) -> &Arc<dyn Inbox> {
        &self.inner.inbox
    }

    pub(crate) fn stop_token(&self) -> &CancellationToken {
        &self.inner.stop
    }

    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.inner.tasks
    }

    /// Answers the entries the inbox still holds from before (oldest first).
    pub(crate) async fn resume(&self) -> Result<usize, super::InboxError> {
        let pending = self
            .inner
            .inbox
            .pending(self.inner.platform.channel())
            .await?;
        let count = pending.len();
        for entry in pending {
            self.enqueue(entry);
        }
        Ok(count)
    }

    /// Hands `entry` (accepted, durable) to its chat's queue.
    pub(crate) fn enqueue(&self, entry: InboxEntry) {
        if self.inner.stop.is_cancelled() {
            // Left pending: the next start answers it.
            return;
        }
        let chat = chat_of(&entry);
        let mut queues = self.inner.queues.lock();
        if let Some(queue) = queues.get(&chat) {
            match queue.send(entry) {
                Ok(()) => return,
                // The worker is gone (it only leaves under this lock with its queue removed,
                // so this is a stopped courier): a new one takes the entry.
                Err(mpsc::error::SendError(back)) => {
                    return self.start_worker(&mut queues, chat, back)
                }
            }
        }
        self.start_worker(&mut queues, chat, entry);
    }

    fn start_worker(
        &self,
        queues: &mut HashMap<String, mpsc::UnboundedSender<InboxEntry>>,
        chat: String,
        first: InboxEntry,
    ) {
        let (queue, mut receiver) = mpsc::unbounded_channel();
        queue.send(first).expect("the receiver is held right here");
        queues.insert(chat.clone(), queue);
        let courier = self.clone();
        self.inner.tasks.spawn(async move {
            loop {
                let next = {
                    let mut queues = courier.inner.queues.lock();
                    match receiver.try_recv() {
                        Ok(entry) => Some(entry),
                        Err(_) => {
                            // Removed under the lock senders take: nothing is sent to a
                            // queue nobody reads.
                            queues.remove(&chat);
                            None
                        }
                    }
                };
                let Some(entry) = next else { break };
                courier.hand_over(entry).await;
            }
        });
    }

    /// Hands one entry's message to the runtime, then writes its reply in a task of its own.
    async fn hand_over(&self, entry: InboxEntry) {
        let mut attempt = 0;
        let stream = loop {
            attempt += 1;
            let options = CallOptions::default().with_request_id(entry.request_id());
            let sent = tokio::select! {
                sent = self.inner.router.send_streaming(entry.message.clone(), options) => sent,
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
        self.inner.tasks.spawn(async move {
            tokio::select! {
                () = courier.reply(entry, stream) => {}
                // Left pending at a stop: the next start edits what was posted.
                () = courier.inner.stop.cancelled() => {}
            }
        });
    }

    /// Waits `wait`, or fails when the courier stops meanwhile.
    async fn pause(&self, wait: Duration) -> Result<(), ()> {
        tokio::select! {
            () = tokio::time::sleep(wait) => Ok(()),
            () = self.inner.stop.cancelled() => Err(()),
        }
    }

    /// Streams the reply of `entry` from its turn, then marks it done.
    async fn reply(&self, entry: InboxEntry, stream: Result<TurnStream, ChannelError>) {
        let channel = self.inner.platform.channel();
        let mut writer = Writer::new(self, entry);
        let text = match stream {
            Ok(stream) => match writer.stream(stream).await {
                Some(text) => text,
                // The runtime is draining: the reply is written after the restart.
                None => return,
            },
            Err(e) => {
                tracing::warn!(channel, error = %e, "a channel message could not be answered");
                Some(format!(
                    "⚠ Sorry, this message could not be answered ({}).",
                    error_code(&e)
                ))
            }
        };
        let written = match text {
            Some(text) => writer.show(&text, true).await,
            None => Ok(()),
        };
        let result = match &written {
            Ok(()) => "sent",
            Err(_) => "failed",
        };
        metrics::counter!("turnstile_channel_replies_total", "channel" => channel, "result" => result)
            .increment(1);
        if let Err(e) = written {
            tracing::error!(channel, error = %e, "a reply could not be written; given up");
        }
        let mut done = writer.entry;
        done.done = true;
        if let Err(e) = self.inner.inbox.update(&done).await {
            // Still pending in the inbox: the next start writes the reply again (an edit of the
            // same text).
            tracing::error!(channel, error = %e, "a written reply could not be marked done");
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

/// The chat an entry's reply is paced by (its session).
fn chat_of(entry: &InboxEntry) -> String {
    let message = &entry.message;
    match &message.thread {
        Some(thread) => format!("{}|{}|{}", message.channel, message.chat, thread),
        None => format!("{}|{}", message.channel, message.chat),
    }
}

/// One reply being written: what was posted, and what each posted part shows.
struct Writer<'a> {
    courier: &'a Courier,
    entry: InboxEntry,
    chat: String,
    /// The text each posted part shows now (empty after a restart: the first show edits all).
    shown: Vec<String>,
}

impl<'a> Writer<'a> {
    fn new(courier: &'a Courier, entry: InboxEntry) -> Self {
        Self {
            courier,
            chat: chat_of(&entry),
            entry,
            shown: Vec::new(),
        }
    }

    /// Reads the turn's stream, showing its text as it grows; returns the reply's final text
    /// (`None` inside when there is nothing to show), or `None` when the runtime is draining.
    async fn stream(&mut self, mut stream: TurnStream) -> Option<Option<String>> {
        use futures::StreamExt;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Chunk(chunk) => {
                    text.push_str(&chunk);
                    if !text.trim().is_empty() {
                        // Best effort while streaming: the final text is shown for sure.
                        let _ = self.show(&text, false).await;
                    }
                }
                StreamEvent::Outcome(Ok(outcome)) => {
                    return Some(match outcome.kind {
                        // Another message's reply answers these.
                        OutcomeKind::Superseded | OutcomeKind::Merged
                            if self.entry.posted.is_empty() =>
                        {
                            None
                        }
                        // Cut short before it said anything (a newer message came): the
                        // newer message's reply answers.
                        OutcomeKind::Interrupted(_)
                            if outcome.output.trim().is_empty() && self.entry.posted.is_empty() =>
                        {
                            None
                        }
                        OutcomeKind::Interrupted(_) => {
                            Some(format!("{}\n\n(interrupted)", outcome.output.trim_end()))
                        }
                        OutcomeKind::Incomplete(_) => {
                            Some(format!("{}\n\n(cut short)", outcome.output.trim_end()))
                        }
                        _ if outcome.output.trim().is_empty() => Some("(no reply)".to_owned()),
                        _ => Some(outcome.output),
                    });
                }
                StreamEvent::Outcome(Err(Error::Draining)) => return None,
                StreamEvent::Outcome(Err(e)) => {
                    tracing::warn!(
                        channel = self.courier.inner.platform.channel(),
                        code = e.code(),
                        "a channel message's turn failed"
                    );
                    return Some(Some(format!(
                        "⚠ Sorry, this message could not be answered ({}).",
                        e.code()
                    )));
                }
                _ => {}
            }
        }
        None
    }

    /// Shows `text`: edits the posted parts whose text changed and posts the parts beyond.
    /// While streaming (`last` false) a call waits for no pacing slot and is not retried; the
    /// last show waits for its slots and retries a failing platform.
    async fn show(&mut self, text: &str, last: bool) -> Result<(), PlatformError> {
        let platform = self.courier.inner.platform.clone();
        let parts = split_reply(text, platform.max_chars());
        for (at, part) in parts.iter().enumerate() {
            let part = part.trim_end();
            let part = if part.is_empty() { "…" } else { part };
            if self.shown.get(at).is_some_and(|shown| shown == part) {
                continue;
            }
            if !last
                && !self
                    .courier
                    .inner
                    .pacer
                    .try_take(&self.chat, self.courier.inner.interval)
            {
                return Ok(());
            }
            let posted = self.entry.posted.get(at).cloned();
            let done = self
                .attempt(
                    last,
                    |platform| {
                        let posted = posted.clone();
                        let target = self.entry.reply_to.clone();
                        let part = part.to_owned();
                        async move {
                            match posted {
                                Some(id) => platform.edit(&target, &id, &part).await.map(|()| id),
                                None => platform.post(&target, at, &part).await,
                            }
                        }
                    },
                    &platform,
                )
                .await?;
            if posted.is_none() {
                self.entry.posted.push(done);
                // Kept before anything else is posted: a reply resumed after a crash edits
                // this message instead of posting it again.
                if let Err(e) = self.courier.inner.inbox.update(&self.entry).await {
                    tracing::error!(channel = platform.channel(), error = %e,
                        "a posted reply could not be recorded in the inbox");
                }
            }
            if self.shown.len() <= at {
                self.shown.resize(at + 1, String::new());
            }
            self.shown[at] = part.to_owned();
        }
        Ok(())
    }

    /// Runs one platform call: once while streaming (a 429 holds the chat), or up to
    /// [`ATTEMPTS`] times for the last show, honouring 429s and backing off on failures.
    async fn attempt<F, Fut>(
        &self,
        last: bool,
        call: F,
        platform: &Arc<dyn Platform>,
    ) -> Result<String, PlatformError>
    where
        F: Fn(Arc<dyn Platform>) -> Fut,
        Fut: std::future::Future<Output = Result<String, PlatformError>>,
    {
        let pacer = &self.courier.inner.pacer;
        let mut attempt = 0;
        loop {
            attempt += 1;
            if last {
                pacer.take(&self.chat, self.courier.inner.interval).await;
            }
            let error = match call(platform.clone()).await {
                Ok(id) => return Ok(id),
                Err(e) => e,
            };
            metrics::counter!("turnstile_channel_platform_errors_total",
                "channel" => platform.channel(), "kind" => error.kind())
            .increment(1);
            let wait = match &error {
                PlatformError::RateLimited { retry_after, .. }
                    if *retry_after <= MAX_RETRY_AFTER =>
                {
                    pacer.hold(&self.chat, Instant::now() + *retry_after);
                    Duration::ZERO
                }
                PlatformError::Unavailable { .. } => backoff(attempt),
                _ => return Err(error),
            };
            if !last || attempt >= ATTEMPTS {
                return Err(error);
            }
            tracing::warn!(channel = platform.channel(), error = %error, attempt,
                "a reply could not be written; trying again");
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_chat_s_calls_are_spaced_and_a_hold_delays_them() {
        let pacer = Pacer::default();
        let interval = Duration::from_secs(1);
        let start = Instant::now();
        pacer.take("a", interval).await;
        assert!(!pacer.try_take("a", interval), "the slot was just taken");
        assert!(
            pacer.try_take("b", interval),
            "another chat has its own slots"
        );
        pacer.take("a", interval).await;
        assert_eq!(start.elapsed(), interval);
        pacer.hold("a", Instant::now() + Duration::from_secs(5));
        pacer.take("a", interval).await;
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }

    #[test]
    fn backoff_doubles_and_stops_growing() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(20), Duration::from_secs(16));
    }
}
