//! Telegram's long polling: `getUpdates` in a loop, each update stored before the next poll's
//! offset confirms it to Telegram.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{accept, now_ms};
use crate::channel::courier::Courier;
use crate::channel::platform::{Inbound, InboundError, Telegram, MAX_RETRY_AFTER};
use crate::channel::{Accepted, InboxEntry, PlatformError};

/// The wait after the `failures`-th failure in a row: half a second, doubling, at most 32 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(500) * 2u32.pow(failures.clamp(1, 7) - 1)
}

/// Long-polls Telegram until stopped: each update is stored before the next poll confirms it.
pub(super) async fn poll_loop(
    courier: Courier,
    bot: Arc<Telegram>,
    wait: Duration,
    stop: CancellationToken,
) {
    let mut offset = 0i64;
    let mut failures = 0u32;
    loop {
        let polled = tokio::select! {
            polled = bot.poll(offset, wait) => polled,
            () = stop.cancelled() => return,
        };
        let updates = match polled {
            Ok(updates) => {
                failures = 0;
                updates
            }
            Err(e) => {
                failures += 1;
                let pause = match &e {
                    PlatformError::RateLimited { retry_after, .. } => *retry_after,
                    _ => backoff(failures),
                };
                tracing::warn!(channel = "telegram", error = %e, ?pause, "getUpdates failed");
                tokio::select! {
                    () = tokio::time::sleep(pause.min(MAX_RETRY_AFTER)) => continue,
                    () = stop.cancelled() => return,
                }
            }
        };
        let mut stored_all = true;
        for (id, read) in updates {
            // Stored before the offset moves past it: the next poll confirms it to Telegram.
            if !store_polled(&courier, read).await {
                stored_all = false;
                break;
            }
            if let Some(id) = id {
                offset = offset.max(id.saturating_add(1));
            }
        }
        if !stored_all {
            // Not stored (the inbox is full or failing): Telegram sends it again; ask after a
            // pause, not at once.
            failures += 1;
            tokio::select! {
                () = tokio::time::sleep(backoff(failures)) => {}
                () = stop.cancelled() => return,
            }
        }
    }
}

/// Stores one polled update; whether the poll may move past it.
async fn store_polled(courier: &Courier, read: Result<Inbound, InboundError>) -> bool {
    let counted = |result: &'static str| {
        metrics::counter!("turnstile_channel_messages_total",
            "channel" => "telegram", "result" => result)
        .increment(1);
    };
    match read {
        Ok(Inbound::Message {
            id,
            message,
            reply_to,
        }) => {
            let entry = InboxEntry::new(id, message, reply_to, now_ms());
            match accept(courier, entry).await {
                Ok(Accepted::New) => counted("accepted"),
                Ok(Accepted::Duplicate) => counted("duplicate"),
                Err(e) => {
                    counted("refused");
                    tracing::warn!(channel = "telegram", error = %e, "an update could not be stored");
                    return false;
                }
            }
        }
        Ok(_) => counted("ignored"),
        Err(e) => {
            counted("malformed");
            tracing::warn!(channel = "telegram", error = %e, "a malformed update was skipped");
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_backs_off_from_half_a_second_to_half_a_minute() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(30), Duration::from_secs(32));
    }
}
