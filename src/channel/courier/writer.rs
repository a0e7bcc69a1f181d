//! [`Writer`]: one reply being written — the turn's stream read, its text shown by posting and
//! editing the platform's messages, each posted message's id kept in the inbox before anything
//! more is posted.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{backoff, session_of, Courier, ATTEMPTS};
use crate::call::{Outcome, OutcomeKind};
use crate::channel::platform::{split_reply, Platform, PlatformError, MAX_RETRY_AFTER};
use crate::channel::InboxEntry;
use crate::state::InterruptReason;
use crate::stream::{StreamEvent, TurnStream};
use crate::Error;

/// Why a reply was not written.
#[derive(Debug)]
pub(super) enum NotWritten {
    /// The platform refused or kept failing: the reply is given up on.
    Platform(PlatformError),
    /// A posted message's id could not be kept: posting more would risk posting it again after a
    /// restart, so the reply stops here and its entry stays pending.
    Unrecorded(crate::channel::InboxError),
}

impl std::fmt::Display for NotWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Platform(e) => e.fmt(f),
            Self::Unrecorded(e) => write!(f, "a posted reply could not be recorded: {e}"),
        }
    }
}

/// What a turn's outcome shows in the chat; `None` when another message's reply answers it.
pub(super) fn reply_text(outcome: &Outcome, posted: bool) -> Option<String> {
    let said = !outcome.output.trim().is_empty();
    match outcome.kind {
        // A newer message came first (`latest`) or this one was answered with others (`merge`):
        // that reply answers it.
        OutcomeKind::Superseded | OutcomeKind::Merged if !posted => None,
        OutcomeKind::Interrupted(InterruptReason::Superseded) if !said && !posted => None,
        OutcomeKind::Interrupted(_) if !said => Some("(interrupted before it answered)".into()),
        OutcomeKind::Interrupted(_) => {
            Some(format!("{}\n\n(interrupted)", outcome.output.trim_end()))
        }
        OutcomeKind::Incomplete(_) => Some(format!("{}\n\n(cut short)", outcome.output.trim_end())),
        _ if !said => Some("(no reply)".to_owned()),
        _ => Some(outcome.output.clone()),
    }
}

/// The text a failed turn shows.
pub(super) fn failure_text(code: &str) -> String {
    format!("⚠ Sorry, this message could not be answered ({code}).")
}

/// One reply being written: what was posted, and what each posted part shows.
pub(super) struct Writer<'a> {
    courier: &'a Courier,
    pub(super) entry: InboxEntry,
    chat: String,
    /// The text each posted part shows now (empty after a restart: the first show edits all).
    shown: Vec<String>,
}

impl<'a> Writer<'a> {
    pub(super) fn new(courier: &'a Courier, entry: InboxEntry) -> Self {
        Self {
            courier,
            chat: session_of(&entry),
            entry,
            shown: Vec::new(),
        }
    }

    /// Reads the turn's stream, showing its text as it grows; returns the reply's final text
    /// (`None` inside when another message's reply answers it), or `None` when the runtime is
    /// draining (the reply is written after the restart).
    pub(super) async fn stream(&mut self, mut stream: TurnStream) -> Option<Option<String>> {
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
                    return Some(reply_text(&outcome, !self.entry.posted.is_empty()));
                }
                StreamEvent::Outcome(Err(Error::Draining)) => return None,
                StreamEvent::Outcome(Err(e)) => {
                    tracing::warn!(
                        channel = self.courier.platform().channel(),
                        code = e.code(),
                        "a channel message's turn failed"
                    );
                    return Some(Some(failure_text(e.code())));
                }
                _ => {}
            }
        }
        None
    }

    /// Shows `text`: edits the posted parts whose text changed and posts the parts beyond.
    /// While streaming (`last` false) a call waits for no pacing slot and is not retried; the
    /// last show waits for its slots and retries a failing platform.
    pub(super) async fn show(&mut self, text: &str, last: bool) -> Result<(), NotWritten> {
        let platform = self.courier.platform().clone();
        let parts = split_reply(text, platform.max_chars());
        for (at, part) in parts.iter().enumerate() {
            let part = part.trim_end();
            let part = if part.is_empty() { "…" } else { part };
            if self.shown.get(at).is_some_and(|shown| shown == part) {
                continue;
            }
            let interval = self.courier.interval();
            if !last && !self.courier.pacer().try_take(&self.chat, interval) {
                return Ok(());
            }
            let posted = self.entry.posted.get(at).cloned();
            let target = self.entry.reply_to.clone();
            let done = self
                .attempt(last, &platform, || {
                    let (platform, posted, target) = (platform.clone(), posted.clone(), &target);
                    async move {
                        match posted {
                            Some(id) => platform.edit(target, &id, part).await.map(|()| id),
                            None => platform.post(target, at, part).await,
                        }
                    }
                })
                .await
                .map_err(NotWritten::Platform)?;
            if posted.is_none() {
                self.entry.posted.push(done);
                // Kept before anything else is posted: a reply resumed after a crash edits
                // this message instead of posting it again.
                self.courier
                    .inbox()
                    .update(&self.entry)
                    .await
                    .map_err(NotWritten::Unrecorded)?;
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
        platform: &Arc<dyn Platform>,
        call: F,
    ) -> Result<String, PlatformError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<String, PlatformError>>,
    {
        let pacer = self.courier.pacer();
        let mut attempt = 0;
        loop {
            attempt += 1;
            if last {
                pacer.take(&self.chat, self.courier.interval()).await;
            }
            let error = match call().await {
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

    fn outcome(kind: OutcomeKind, output: &str) -> Outcome {
        Outcome {
            kind,
            output: output.into(),
            seq: 1,
            usage: None,
            calls: Vec::new(),
        }
    }

    #[test]
    fn only_a_message_a_newer_one_answers_goes_without_a_reply_of_its_own() {
        let superseded = OutcomeKind::Interrupted(InterruptReason::Superseded);
        assert_eq!(
            reply_text(&outcome(OutcomeKind::Superseded, ""), false),
            None
        );
        assert_eq!(reply_text(&outcome(OutcomeKind::Merged, "x"), false), None);
        assert_eq!(reply_text(&outcome(superseded, ""), false), None);
        // Once something was posted, it is finished, not left as it was.
        assert_eq!(
            reply_text(&outcome(superseded, "half"), true).as_deref(),
            Some("half\n\n(interrupted)")
        );
        // Cut short by its deadline, a drain or an operator, before it said anything: the
        // person is told so, never left without an answer.
        for reason in [
            InterruptReason::Deadline,
            InterruptReason::Shutdown,
            InterruptReason::Requested,
        ] {
            assert_eq!(
                reply_text(&outcome(OutcomeKind::Interrupted(reason), ""), false).as_deref(),
                Some("(interrupted before it answered)")
            );
        }
        assert_eq!(
            reply_text(&outcome(OutcomeKind::Completed, " "), false).as_deref(),
            Some("(no reply)")
        );
    }
}
