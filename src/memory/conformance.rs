//! The conformance suite every [`MemoryStore`] must pass.
//!
//! Call [`run_all`] from a test with a factory that returns a fresh, empty store each time:
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use turnstile::memory::{conformance, InMemory};
//! conformance::run_all(|| async { Arc::new(InMemory::new()) as _ }).await;
//! # }
//! ```
//!
//! Each check panics with a message naming the property that broke.

use std::future::Future;
use std::sync::Arc;

use super::{MemoryEntry, MemoryError, MemoryStore, Speaker, MAX_ENTRY_BYTES, MAX_K};
use crate::key::SessionKey;
use crate::state::Seq;

/// Runs every check, each against a fresh store from `make`.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn MemoryStore>>,
{
    search_finds_every_session_of_the_user_best_first(make().await).await;
    ingesting_twice_adds_nothing(make().await).await;
    users_never_see_each_other(make().await).await;
    bad_searches_are_clear_errors(make().await).await;
    deleting_a_session_keeps_the_others(make().await).await;
    deleting_a_user_keeps_the_others(make().await).await;
    anonymous_sessions_are_refused_whole(make().await).await;
    long_texts_are_cut(make().await).await;
}

fn key(user: &str, session: &str) -> SessionKey {
    SessionKey::new(user, session).expect("valid test key")
}

/// An entry said by the user in `session` of `user`.
pub fn entry(user: &str, session: &str, seq: Seq, text: &str) -> MemoryEntry {
    MemoryEntry {
        key: key(user, session),
        seq,
        speaker: Speaker::User,
        text: text.to_owned(),
        at_ms: 1_000 + seq,
    }
}

/// A search finds entries of every session of the user, best first, with snippets.
pub async fn search_finds_every_session_of_the_user_best_first(store: Arc<dyn MemoryStore>) {
    let entries = [
        entry("ada", "monday", 1, "my order number is 88123"),
        entry("ada", "monday", 2, "thanks, noted"),
        entry(
            "ada",
            "tuesday",
            1,
            "where is my order? it is late, order 88123",
        ),
        entry("ada", "tuesday", 3, "the weather is lovely"),
    ];
    assert_eq!(store.ingest(&entries).await.expect("ingest"), 4);
    let hits = store
        .search("ada", "order 88123", 10)
        .await
        .expect("search");
    let sessions: Vec<_> = hits.iter().map(|h| h.entry.key.session_id()).collect();
    assert_eq!(
        hits.len(),
        2,
        "only entries sharing a word are returned: {sessions:?}"
    );
    assert!(sessions.contains(&"monday") && sessions.contains(&"tuesday"));
    assert!(hits[0].score >= hits[1].score, "best first");
    assert!(hits.iter().all(|h| h.snippet.contains("88123")));
    let one = store.search("ada", "weather", 1).await.expect("search");
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].entry.seq, one[0].entry.speaker), (3, Speaker::User));
    assert_eq!(
        one[0].entry, entries[3],
        "an entry comes back as it was ingested"
    );
}

/// Ingesting the same `(session, seq)` again — in a later call or twice in one — adds nothing,
/// and the session's mark is its highest seq.
pub async fn ingesting_twice_adds_nothing(store: Arc<dyn MemoryStore>) {
    let first = [entry("bo", "s", 1, "apples"), entry("bo", "s", 2, "pears")];
    assert_eq!(store.ingest(&first).await.expect("ingest"), 2);
    assert_eq!(
        store.ingest(&first).await.expect("again"),
        0,
        "a repeat adds nothing"
    );
    let doubled = [entry("bo", "s", 3, "plums"), entry("bo", "s", 3, "plums")];
    assert_eq!(store.ingest(&doubled).await.expect("doubled"), 1);
    let hits = store
        .search("bo", "apples pears plums", 10)
        .await
        .expect("search");
    assert_eq!(hits.len(), 3, "one hit per entry, no duplicates");
    assert_eq!(
        store.ingested_through(&key("bo", "s")).await.expect("mark"),
        3
    );
    assert_eq!(
        store
            .ingested_through(&key("bo", "other"))
            .await
            .expect("mark"),
        0
    );
}

/// A user's search never returns another user's entries, hostile ids included.
pub async fn users_never_see_each_other(store: Arc<dyn MemoryStore>) {
    let users = [
        "alice", "mallory", "../alice", "alice*", "{alice}", "alice:e", "a%2Fb",
    ];
    for user in users {
        store
            .ingest(&[entry(user, "s", 1, &format!("secret of {user}"))])
            .await
            .expect("ingest");
    }
    for user in users {
        let hits = store.search(user, "secret", MAX_K).await.expect("search");
        assert_eq!(hits.len(), 1, "{user} sees exactly its own entry");
        assert_eq!(hits[0].entry.key.user_id(), user);
    }
    let hits = store.search("nobody", "secret", 5).await.expect("search");
    assert!(hits.is_empty(), "a user without memory finds nothing");
}

/// An empty query and `k` outside `1..=MAX_K` are typed errors.
pub async fn bad_searches_are_clear_errors(store: Arc<dyn MemoryStore>) {
    store
        .ingest(&[entry("cy", "s", 1, "hello")])
        .await
        .expect("ingest");
    for query in ["", "   ", "?!., —"] {
        let err = store.search("cy", query, 3).await.expect_err("empty query");
        assert!(matches!(err, MemoryError::EmptyQuery), "{query:?}: {err}");
    }
    for k in [0, MAX_K + 1] {
        let err = store.search("cy", "hello", k).await.expect_err("bad k");
        assert!(matches!(err, MemoryError::InvalidK { .. }), "k={k}: {err}");
    }
}

/// Deleting a session removes its entries and mark, and nothing else.
pub async fn deleting_a_session_keeps_the_others(store: Arc<dyn MemoryStore>) {
    let entries = [
        entry("di", "a", 1, "blue sky"),
        entry("di", "a", 2, "blue sea"),
        entry("di", "b", 1, "blue car"),
    ];
    store.ingest(&entries).await.expect("ingest");
    assert_eq!(
        store.delete_session(&key("di", "a")).await.expect("delete"),
        2
    );
    let hits = store.search("di", "blue", 10).await.expect("search");
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entry.key.session_id(), "b");
    assert_eq!(
        store.ingested_through(&key("di", "a")).await.expect("mark"),
        0
    );
    assert_eq!(
        store.delete_session(&key("di", "a")).await.expect("again"),
        0
    );
}

/// Deleting a user removes all of that user's entries and no one else's.
pub async fn deleting_a_user_keeps_the_others(store: Arc<dyn MemoryStore>) {
    let entries = [
        entry("ed", "a", 1, "green tea"),
        entry("ed", "b", 1, "green apple"),
        entry("eda", "a", 1, "green light"),
    ];
    store.ingest(&entries).await.expect("ingest");
    assert_eq!(store.delete_user("ed").await.expect("delete"), 2);
    assert!(store
        .search("ed", "green", 10)
        .await
        .expect("search")
        .is_empty());
    assert_eq!(
        store.ingested_through(&key("ed", "a")).await.expect("mark"),
        0
    );
    assert_eq!(
        store
            .search("eda", "green", 10)
            .await
            .expect("search")
            .len(),
        1
    );
}

/// A call with an entry of an anonymous session is refused, and none of its entries is stored.
pub async fn anonymous_sessions_are_refused_whole(store: Arc<dyn MemoryStore>) {
    let anonymous = MemoryEntry {
        key: SessionKey::anonymous("x").expect("valid key"),
        ..entry("fay", "s", 2, "anonymous words")
    };
    let err = store
        .ingest(&[entry("fay", "s", 1, "named words"), anonymous])
        .await
        .expect_err("anonymous refused");
    assert!(matches!(err, MemoryError::Anonymous { .. }), "{err}");
    assert!(store
        .search("fay", "words", 5)
        .await
        .expect("search")
        .is_empty());
    assert!(store
        .search("", "words", 5)
        .await
        .expect("search")
        .is_empty());
}

/// Texts longer than `MAX_ENTRY_BYTES` are cut at a character boundary.
pub async fn long_texts_are_cut(store: Arc<dyn MemoryStore>) {
    let text = format!("needle {}", "é".repeat(MAX_ENTRY_BYTES));
    store
        .ingest(&[entry("gus", "s", 1, &text)])
        .await
        .expect("ingest");
    let hits = store.search("gus", "needle", 1).await.expect("search");
    assert_eq!(hits.len(), 1);
    let stored = &hits[0].entry.text;
    assert!(stored.len() <= MAX_ENTRY_BYTES && stored.len() > MAX_ENTRY_BYTES - 4);
    assert!(text.starts_with(stored.as_str()));
}
