//! [`Pacer`]: one chat's API calls spaced apart, and held for the wait a platform's 429 asked.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Most chats whose pacing is remembered: past it, chats whose next slot has passed are
/// forgotten (they have nothing to wait for).
const MAX_PACED_CHATS: usize = 10_000;

/// Spaces the API calls of each chat an interval apart, and holds a chat for the wait
/// a platform's 429 asked for.
#[derive(Debug, Default)]
pub(super) struct Pacer {
    next: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Waits for the chat's next slot and takes it.
    pub(super) async fn take(&self, chat: &str, interval: Duration) {
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
    pub(super) fn try_take(&self, chat: &str, interval: Duration) -> bool {
        let mut next = self.next.lock();
        let now = Instant::now();
        if next.get(chat).is_some_and(|at| *at > now) {
            return false;
        }
        next.insert(chat.to_owned(), now + interval);
        true
    }

    /// Holds the chat until `until`.
    pub(super) fn hold(&self, chat: &str, until: Instant) {
        let mut next = self.next.lock();
        let at = next.entry(chat.to_owned()).or_insert(until);
        *at = (*at).max(until);
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
}
