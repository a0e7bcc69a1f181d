//! The conformance suite every [`Store`] must pass.
//!
//! Call [`run_all`] from a test with a factory that returns a fresh, empty store each time:
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! turnstile::store::conformance::run_all(|| async { Arc::new(turnstile::InMemoryStore::new()) as _ }).await;
//! # }
//! ```
//!
//! Stores that several processes share are also run through [`run_two_handles`], whose checks
//! write through one handle while another holds an older view of the session: that is how a
//! stale write gets past any shortcut a handle takes on its own (a cached head, say) and reaches
//! the store's own atomic compare-and-set.
//!
//! Each check panics with a message naming the property that broke.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;

use super::{PageRequest, Store, StoreError};
use crate::key::SessionKey;
use crate::state::{Author, Event, EventKind, InputDisposition, StateDelta};

mod leases;
mod removal;
mod shared_state;
mod two_handles;

pub use leases::{
    a_claim_reads_what_a_load_reads_and_only_when_granted, a_former_holder_can_never_commit,
    an_unrenewed_lease_expires, one_holder_at_a_time_and_only_its_writes_commit,
    renewal_is_per_lease_and_epochs_survive_deletion, the_same_instance_takes_its_own_lease_over,
};

pub use removal::{
    delete_removes_one_session, delete_user_touches_no_other_user,
    gc_removes_old_and_excess_sessions,
};
pub use shared_state::{null_deletes_shared_keys, shared_state_is_kept_once_per_user_and_app};
pub use two_handles::{
    a_write_based_on_a_version_another_handle_replaced_is_refused,
    racing_writers_on_two_handles_let_exactly_one_win,
};

/// Runs every conformance check, each against a fresh store from `make`.
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    round_trip(make().await).await;
    stale_version_is_refused(make().await).await;
    windowed_load_returns_the_newest_events(make().await).await;
    shared_state_is_kept_once_per_user_and_app(make().await).await;
    listing_is_paged_metadata(make().await).await;
    delete_removes_one_session(make().await).await;
    delete_user_touches_no_other_user(make().await).await;
    gc_removes_old_and_excess_sessions(make().await).await;
    hostile_keys_stay_in_their_namespace(make().await).await;
    concurrent_writers_of_one_version_let_exactly_one_win(make().await).await;
    anonymous_sessions_are_apart_from_every_user(make().await).await;
    read_events_pages_through_the_log(make().await).await;
    text_and_unknown_fields_round_trip_exactly(make().await).await;
    null_deletes_shared_keys(make().await).await;
    failed_turns_round_trip_and_raise_only_their_heads_version(make().await).await;
}

/// Runs every check that needs two handles on one store's data, each against a fresh, empty
/// store from `make`. The two handles should be what two processes would hold (two connections,
/// each with its own caches); a store that one process at most may open passes the same handle
/// twice.
///
/// ```no_run
/// # async fn demo() {
/// use std::sync::Arc;
/// use turnstile::{InMemoryStore, Store};
/// turnstile::store::conformance::run_two_handles(|| async {
///     let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
///     (store.clone(), store)
/// })
/// .await;
/// # }
/// ```
pub async fn run_two_handles<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = (Arc<dyn Store>, Arc<dyn Store>)>,
{
    let (a, b) = make().await;
    a_write_based_on_a_version_another_handle_replaced_is_refused(a, b).await;
    let (a, b) = make().await;
    racing_writers_on_two_handles_let_exactly_one_win(a, b).await;
}

/// Runs every check of leases and fenced writes (for stores whose [`Store::leases`] is
/// `Some`), each against a fresh pair of handles from `make`, as in [`run_two_handles`].
pub async fn run_leases<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = (Arc<dyn Store>, Arc<dyn Store>)>,
{
    let (a, b) = make().await;
    one_holder_at_a_time_and_only_its_writes_commit(a, b).await;
    let (a, b) = make().await;
    a_former_holder_can_never_commit(a, b).await;
    let (a, _) = make().await;
    the_same_instance_takes_its_own_lease_over(a).await;
    let (a, _) = make().await;
    renewal_is_per_lease_and_epochs_survive_deletion(a).await;
    let (a, b) = make().await;
    an_unrenewed_lease_expires(a, b).await;
    let (a, b) = make().await;
    a_claim_reads_what_a_load_reads_and_only_when_granted(a, b).await;
}

fn key(user: &str, session: &str) -> SessionKey {
    SessionKey::new(user, session).expect("valid test key")
}

/// Builds the events of one turn starting at `seq`: an input and an output carrying `delta`.
pub fn turn_events(seq: u64, text: &str, delta: Option<StateDelta>) -> Vec<Event> {
    let input = Event::new(
        seq,
        Author::User,
        1_000 + seq,
        EventKind::UserInput {
            text: text.to_owned(),
            disposition: InputDisposition::Answered,
        },
    );
    let mut output = Event::new(
        seq + 1,
        Author::Agent,
        1_000 + seq + 1,
        EventKind::AgentOutput {
            text: format!("re: {text}"),
            status: crate::state::OutputStatus::Final,
            duration_ms: 1,
            usage: None,
        },
    );
    output.state_delta = delta;
    vec![input, output]
}

/// Appends `turns` turns to a new session and returns its version.
async fn fill(store: &dyn Store, key: &SessionKey, turns: u64) -> u64 {
    let mut version = 0;
    for t in 0..turns {
        let events = turn_events(1 + 2 * t, &format!("m{t}"), None);
        version = store
            .append(key, version, &events)
            .await
            .expect("append to a fresh session");
    }
    version
}

/// What was appended is what loads, and the head is the fold of the events.
pub async fn round_trip(store: Arc<dyn Store>) {
    let k = key("alice", "s1");
    let empty = store.load(&k, 10).await.expect("load of a missing session");
    assert!(empty.record.is_none(), "a missing session loads as None");
    assert!(empty.events.is_empty());
    let delta: StateDelta = [("topic".to_owned(), json!("rust"))].into();
    let events = turn_events(1, "hello", Some(delta));
    let v1 = store.append(&k, 0, &events).await.expect("first append");
    assert!(v1 > 0, "versions start above 0");
    let loaded = store.load(&k, 10).await.expect("load");
    let record = loaded.record.expect("stored head");
    assert_eq!(record.version, v1);
    assert_eq!(record.next_seq, 3);
    assert_eq!(record.state["topic"], json!("rust"));
    assert_eq!(record.stats.turns, 1);
    assert_eq!(loaded.events, events, "events round-trip exactly");
    let read = store.read_events(&k, 2, 10).await.expect("read_events");
    assert_eq!(read, events[1..].to_vec());
}

/// A write based on a stale version is refused and changes nothing.
pub async fn stale_version_is_refused(store: Arc<dyn Store>) {
    let k = key("bob", "s");
    let v1 = fill(store.as_ref(), &k, 1).await;
    let v2 = store
        .append(&k, v1, &turn_events(3, "second", None))
        .await
        .expect("append at the current version");
    let stale = store.append(&k, v1, &turn_events(5, "lost?", None)).await;
    match stale {
        Err(StoreError::Conflict {
            expected, found, ..
        }) => {
            assert_eq!((expected, found), (v1, v2));
        }
        other => panic!("a stale base version must be a Conflict, got {other:?}"),
    }
    let fresh_on_existing = store.append(&k, 0, &turn_events(5, "again", None)).await;
    assert!(
        matches!(fresh_on_existing, Err(StoreError::Conflict { .. })),
        "base 0 on an existing session is a conflict"
    );
    let loaded = store.load(&k, 100).await.expect("load");
    assert_eq!(loaded.events.len(), 4, "refused writes leave no trace");
    assert_eq!(loaded.record.expect("head").version, v2);
}

/// `load` returns only the newest `window` events.
pub async fn windowed_load_returns_the_newest_events(store: Arc<dyn Store>) {
    let k = key("carol", "long");
    fill(store.as_ref(), &k, 50).await;
    let loaded = store.load(&k, 7).await.expect("load");
    let seqs: Vec<u64> = loaded.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (94..=100).collect::<Vec<_>>());
    assert_eq!(loaded.record.expect("head").next_seq, 101);
    let none = store.load(&k, 0).await.expect("load");
    assert!(none.events.is_empty());
}

/// Listing pages through a user's sessions by id, metadata only.
pub async fn listing_is_paged_metadata(store: Arc<dyn Store>) {
    for s in ["c", "a", "b", "d", "e"] {
        fill(store.as_ref(), &key("frank", s), 2).await;
    }
    fill(store.as_ref(), &key("grace", "a"), 1).await;
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list("frank", &PageRequest { limit: 2, cursor })
            .await
            .expect("list");
        assert!(page.sessions.len() <= 2);
        for meta in &page.sessions {
            assert_eq!(meta.key.user_id(), "frank");
            assert_eq!(meta.events, 4);
            assert_eq!(meta.stats.turns, 2);
        }
        ids.extend(page.sessions.iter().map(|m| m.key.session_id().to_owned()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    let bad = store
        .list(
            "frank",
            &PageRequest {
                limit: 0,
                cursor: None,
            },
        )
        .await;
    assert!(matches!(bad, Err(StoreError::InvalidRequest(_))));
}

/// Keys that look like paths or patterns are stored as opaque names.
pub async fn hostile_keys_stay_in_their_namespace(store: Arc<dyn Store>) {
    let long = "x".repeat(crate::key::MAX_ID_BYTES);
    let hostile = [
        key("mallory", "../victim"),
        key("..", "s"),
        key("mallory", "a/b"),
        key("mallory", "*"),
        key("mallory", "{victim}"),
        key("mal*", "s"),
        key(&long, &long),
        key("mallory", "%2F.."),
    ];
    fill(store.as_ref(), &key("victim", "s"), 1).await;
    for k in &hostile {
        fill(store.as_ref(), k, 1).await;
        let loaded = store.load(k, 5).await.expect("load hostile key");
        assert_eq!(loaded.record.expect("head").key, *k);
    }
    let page = store
        .list("mallory", &PageRequest::default())
        .await
        .expect("list");
    assert_eq!(page.sessions.len(), 5);
    assert_eq!(store.delete_user("mal*").await.expect("delete_user"), 1);
    assert_eq!(store.delete_user("mallory").await.expect("delete_user"), 5);
    let victim = store.load(&key("victim", "s"), 5).await.expect("load");
    assert_eq!(victim.events.len(), 2, "the victim's session is untouched");
    assert!(store
        .load(&key("..", "s"), 5)
        .await
        .expect("load")
        .record
        .is_some());
}

/// Of several writers racing from the same version, exactly one wins and the log holds exactly
/// its events.
pub async fn concurrent_writers_of_one_version_let_exactly_one_win(store: Arc<dyn Store>) {
    let k = key("race", "s");
    let v1 = fill(store.as_ref(), &k, 1).await;
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (store, k) = (store.clone(), k.clone());
            tokio::spawn(async move {
                let events = turn_events(3, &format!("writer {i}"), None);
                (store.append(&k, v1, &events).await, events)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for writer in writers {
        match writer.await.expect("writer task") {
            (Ok(version), events) => winners.push((version, events)),
            (Err(StoreError::Conflict { .. }), _) => {}
            (Err(other), _) => panic!("a losing writer must see a Conflict, got {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one writer wins");
    let loaded = store.load(&k, 100).await.expect("load");
    assert_eq!(loaded.events.len(), 4);
    assert_eq!(
        loaded.events[2..],
        winners[0].1[..],
        "the winner's events, once"
    );
    assert_eq!(loaded.record.expect("head").version, winners[0].0);
}

/// Anonymous sessions are listed under `""` only, and never see or write user state.
pub async fn anonymous_sessions_are_apart_from_every_user(store: Arc<dyn Store>) {
    let anon = SessionKey::anonymous("guest").expect("valid key");
    let delta: StateDelta = [("user:name".to_owned(), json!("nobody"))].into();
    store
        .append(&anon, 0, &turn_events(1, "hi", Some(delta)))
        .await
        .expect("append");
    fill(store.as_ref(), &key("guest", "guest"), 1).await;
    let page = store.list("", &PageRequest::default()).await.expect("list");
    let keys: Vec<_> = page.sessions.iter().map(|m| m.key.clone()).collect();
    assert_eq!(keys, std::slice::from_ref(&anon));
    let loaded = store.load(&anon, 5).await.expect("load");
    assert!(
        loaded.user_state.is_empty(),
        "anonymous sessions have no user state"
    );
    let named = store.load(&key("guest", "guest"), 5).await.expect("load");
    assert!(
        named.user_state.is_empty(),
        "no user state leaks from an anonymous session"
    );
    assert_eq!(store.delete_user("").await.expect("delete_user"), 1);
    assert!(store
        .load(&key("guest", "guest"), 5)
        .await
        .expect("load")
        .record
        .is_some());
}

/// `read_events` returns exactly the asked-for slice, whatever the bounds.
pub async fn read_events_pages_through_the_log(store: Arc<dyn Store>) {
    let k = key("pager", "s");
    fill(store.as_ref(), &k, 5).await;
    let seqs = |events: Vec<crate::state::Event>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
    let read = |from, limit| {
        let (store, k) = (store.clone(), k.clone());
        async move {
            store
                .read_events(&k, from, limit)
                .await
                .expect("read_events")
        }
    };
    assert_eq!(seqs(read(4, 3).await), [4, 5, 6]);
    assert_eq!(seqs(read(0, 2).await), [1, 2]);
    assert_eq!(seqs(read(9, 100).await), [9, 10]);
    assert!(read(11, 5).await.is_empty());
    assert!(read(1, 0).await.is_empty());
    assert_eq!(read(1, usize::MAX).await.len(), 10);
    assert!(store
        .read_events(&key("pager", "missing"), 1, 5)
        .await
        .expect("read_events")
        .is_empty());
}

/// Text with line breaks and any Unicode, and fields from a newer writer, come back unchanged.
pub async fn text_and_unknown_fields_round_trip_exactly(store: Arc<dyn Store>) {
    let k = key("text", "s");
    let mut events = turn_events(1, "line one\nline two\r\n\u{2028}✓ \"quoted\" \\ {}", None);
    events[1]
        .extra
        .insert("written_by_v9".to_owned(), json!({"nested": [1, "two"]}));
    store.append(&k, 0, &events).await.expect("append");
    let loaded = store.load(&k, 10).await.expect("load");
    assert_eq!(loaded.events, events);
    assert_eq!(store.read_events(&k, 1, 10).await.expect("read"), events);
}

/// A `turn_failed` event and an output cut at the reply limit (schema version 3) round-trip,
/// and raise the head they are folded into to version 3 — only that head: a session without
/// them stays at the version older builds read.
pub async fn failed_turns_round_trip_and_raise_only_their_heads_version(store: Arc<dyn Store>) {
    use crate::state::{
        IncompleteReason, InterruptReason, OutputStatus, FIRST_SCHEMA_VERSION, SCHEMA_VERSION,
    };
    let plain = key("versions", "plain");
    store
        .append(&plain, 0, &turn_events(1, "hello", None))
        .await
        .expect("append a plain turn");
    let head = store.load(&plain, 10).await.expect("load").record;
    assert_eq!(
        head.expect("stored head").schema_version,
        FIRST_SCHEMA_VERSION,
        "a session without newer events keeps the oldest version that holds it"
    );

    let k = key("versions", "failed");
    let mut events = turn_events(1, "question", None);
    events[1].kind = EventKind::TurnFailed {
        code: "model_timeout".into(),
        reason: "the model server sent nothing for 60s".into(),
        duration_ms: 60_000,
    };
    let mut cut = turn_events(3, "talk", None);
    cut[1].kind = EventKind::AgentOutput {
        text: "a long answer, cut".into(),
        status: OutputStatus::Interrupted(InterruptReason::ReplyLimit),
        duration_ms: 5,
        usage: None,
    };
    events.extend(cut);
    store.append(&k, 0, &events).await.expect("append");
    let loaded = store.load(&k, 10).await.expect("load");
    assert_eq!(loaded.events, events, "the new kinds round-trip exactly");
    let record = loaded.record.expect("stored head");
    assert_eq!(
        record.schema_version, 3,
        "failed turns and reply_limit came with 3"
    );
    assert_eq!((record.stats.failed, record.stats.turns), (1, 1));
    assert_eq!(record.stats.interrupted, 1);

    let k = key("versions", "endings");
    let mut events = turn_events(1, "write an essay", None);
    events[1].kind = EventKind::AgentOutput {
        text: "the essay, cut at the token limit".into(),
        status: OutputStatus::Incomplete(IncompleteReason::MaxTokens),
        duration_ms: 5,
        usage: None,
    };
    let mut refused = turn_events(3, "something refused", None);
    refused[1].kind = EventKind::AgentOutput {
        text: "I can't help with that.".into(),
        status: OutputStatus::Refused,
        duration_ms: 5,
        usage: None,
    };
    events.extend(refused);
    store.append(&k, 0, &events).await.expect("append");
    let loaded = store.load(&k, 10).await.expect("load");
    assert_eq!(
        loaded.events, events,
        "the model's endings round-trip exactly"
    );
    let record = loaded.record.expect("stored head");
    assert_eq!(record.schema_version, SCHEMA_VERSION, "they came with 4");
    assert_eq!((record.stats.turns, record.stats.interrupted), (2, 0));
}
