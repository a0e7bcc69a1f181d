//! Reading a session's whole log (or its first part) through the [`Store`] trait, a page at a
//! time, so that no single store call returns an unbounded answer. Used by `Runtime::fork` and by
//! `turnstile sessions export`; works on any store.

use super::{Store, StoreError};
use crate::key::SessionKey;
use crate::state::{Event, Seq};

/// Events per store call that [`read_log`] callers without a reason of their own should use: a
/// log of a few thousand events takes a few round trips, and one page stays a few MB at most.
pub const LOG_PAGE: usize = 1_000;

/// Reads the events of `key` with `seq` in `1..=upto`, oldest first, asking the store for at most
/// `page` events per call (at least 1).
///
/// Returns fewer than `upto` events when the stored log ends sooner (for example because the
/// session was deleted meanwhile): whether that is an error is the caller's to say. A store error
/// is returned as it is; nothing is written.
pub async fn read_log(
    store: &dyn Store,
    key: &SessionKey,
    upto: Seq,
    page: usize,
) -> Result<Vec<Event>, StoreError> {
    let page = page.max(1);
    let mut events: Vec<Event> = Vec::new();
    while (events.len() as u64) < upto {
        let from = events.len() as u64 + 1;
        // `upto - (from - 1)`, not `upto + 1 - from`: `upto` may be `Seq::MAX` ("all of it").
        let want = usize::try_from(upto - (from - 1))
            .unwrap_or(usize::MAX)
            .min(page);
        let read = store.read_events(key, from, want).await?;
        if read.is_empty() {
            break;
        }
        events.extend(read);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::turn_events;
    use crate::store::InMemoryStore;

    async fn session_of(turns: u64) -> (InMemoryStore, SessionKey) {
        let store = InMemoryStore::new();
        let key = SessionKey::new("u", "s").unwrap();
        for turn in 0..turns {
            let events = turn_events(2 * turn + 1, "hi", None);
            store.append(&key, turn, &events).await.unwrap();
        }
        (store, key)
    }

    fn seqs(events: &[Event]) -> Vec<Seq> {
        events.iter().map(|e| e.seq).collect()
    }

    #[tokio::test]
    async fn the_log_is_read_across_pages_up_to_the_bound() {
        let (store, key) = session_of(3).await;
        let all = read_log(&store, &key, 6, 4).await.unwrap();
        assert_eq!(seqs(&all), vec![1, 2, 3, 4, 5, 6]);
        let first = read_log(&store, &key, 5, 2).await.unwrap();
        assert_eq!(seqs(&first), vec![1, 2, 3, 4, 5]);
        let zero_page = read_log(&store, &key, 3, 0).await.unwrap();
        assert_eq!(
            seqs(&zero_page),
            vec![1, 2, 3],
            "a page of 0 reads one at a time"
        );
    }

    #[tokio::test]
    async fn a_log_shorter_than_the_bound_comes_back_short() {
        let (store, key) = session_of(1).await;
        assert_eq!(
            seqs(&read_log(&store, &key, 9, 4).await.unwrap()),
            vec![1, 2]
        );
        let missing = SessionKey::new("u", "none").unwrap();
        assert!(read_log(&store, &missing, 9, 4).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_largest_bound_means_the_whole_log() {
        let (store, key) = session_of(3).await;
        let all = read_log(&store, &key, Seq::MAX, 4).await.unwrap();
        assert_eq!(seqs(&all), (1..=6).collect::<Vec<_>>());
    }
}
