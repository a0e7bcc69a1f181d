//! The journal against the memory store, through `FaultyStore` for what can go wrong: whatever
//! a write meets, the view holds exactly the events the store holds.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Ownership;
use crate::state::{Author, EventKind, InputDisposition, OutputStatus};
use crate::store::{FaultyStore, InMemoryStore};

const WINDOW: usize = 16;

fn key() -> SessionKey {
    SessionKey::new("u", "s").expect("a valid key")
}

/// A journal over `store` as an activation would open it.
async fn open(store: Arc<dyn Store>, keeper: Option<Arc<LeaseKeeper>>) -> Journal {
    let loaded = store.load(&key(), WINDOW).await.expect("load");
    Journal::open(
        key(),
        loaded,
        store,
        keeper,
        Arc::new(SessionShared::default()),
        WINDOW,
    )
}

/// A turn's two events, numbered from where `journal` is.
fn turn(journal: &Journal, text: &str) -> Vec<Event> {
    let seq = journal.next_seq();
    let input = EventKind::UserInput {
        text: text.to_owned(),
        disposition: InputDisposition::Answered,
    };
    let output = EventKind::AgentOutput {
        text: format!("re: {text}"),
        status: OutputStatus::Final,
        duration_ms: 1,
        usage: None,
    };
    vec![
        Event::new(seq, Author::User, 0, input),
        Event::new(seq + 1, Author::Agent, 0, output),
    ]
}

/// The user inputs of `events`, in order.
fn inputs(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserInput { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

fn shown(journal: &Journal) -> Vec<String> {
    inputs(journal.window().events())
}

async fn stored(store: &dyn Store) -> Vec<String> {
    inputs(&store.read_events(&key(), 1, 1_000).await.expect("read"))
}

#[tokio::test]
async fn an_acknowledged_write_is_folded_in() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let mut journal = open(store.clone(), None).await;
    journal.commit(turn(&journal, "one")).await.expect("stored");
    assert_eq!(shown(&journal), ["one"]);
    assert_eq!(journal.record().version, 1);
    assert_eq!(journal.next_seq(), 3);
    assert!(journal.acknowledged_in_full(2));
    assert_eq!(stored(store.as_ref()).await, ["one"]);
}

#[tokio::test]
async fn a_refused_write_leaves_nothing_behind() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let mut journal = open(faulty.clone(), None).await;
    journal.commit(turn(&journal, "one")).await.expect("stored");
    faulty.fail_next_appends(1);
    let refused = journal.commit(turn(&journal, "two")).await;
    assert!(refused.is_err(), "a failed write is never acknowledged");
    assert_eq!(shown(&journal), ["one"], "the refused turn is not shown");
    assert_eq!(journal.next_seq(), 3, "nor built on");
    // An injected failure happens before the store: the read-back finds nothing and drops it.
    journal.settle().await.expect("the store answers again");
    assert!(journal.is_settled());
    assert_eq!(journal.held_apart(), 0);
    journal
        .commit(turn(&journal, "three"))
        .await
        .expect("stored");
    assert_eq!(shown(&journal), ["one", "three"]);
    assert_eq!(stored(faulty.inner().as_ref()).await, ["one", "three"]);
}

#[tokio::test]
async fn a_write_whose_answer_was_lost_is_adopted_once_read_back() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let mut journal = open(faulty.clone(), None).await;
    faulty.lose_next_answers(1);
    assert!(journal.commit(turn(&journal, "one")).await.is_err());
    assert_eq!(
        journal.held_apart(),
        2,
        "held apart until the store is read back"
    );
    assert!(
        shown(&journal).is_empty(),
        "an unknown outcome is never shown"
    );
    assert!(!journal.is_settled());
    journal.settle().await.expect("read back");
    assert_eq!(shown(&journal), ["one"], "the store has it: adopted");
    assert_eq!(journal.record().version, 1);
    assert!(
        !journal.acknowledged_in_full(2),
        "adopted, not acknowledged in full: a retry still checks replicas"
    );
    journal
        .commit(turn(&journal, "two"))
        .await
        .expect("no conflict");
    assert_eq!(stored(faulty.inner().as_ref()).await, ["one", "two"]);
}

#[tokio::test]
async fn a_journal_that_cannot_read_back_writes_nothing() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let mut journal = open(faulty.clone(), None).await;
    faulty.lose_next_answers(1);
    assert!(journal.commit(turn(&journal, "one")).await.is_err());
    faulty.fail_next_reads(1);
    let attempted = faulty.appends_attempted();
    assert!(journal.commit(turn(&journal, "two")).await.is_err());
    assert_eq!(
        faulty.appends_attempted(),
        attempted,
        "no write is based on a version that may be stale"
    );
    assert_eq!(journal.held_apart(), 2, "still uncertain");
    // Once the store answers, the first write is adopted and the next one builds on it.
    journal.settle().await.expect("read back");
    journal
        .commit(turn(&journal, "three"))
        .await
        .expect("stored");
    assert_eq!(shown(&journal), ["one", "three"]);
    assert_eq!(stored(faulty.inner().as_ref()).await, ["one", "three"]);
}

#[tokio::test]
async fn a_conflict_reloads_what_the_other_writer_stored() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let mut journal = open(store.clone(), None).await;
    journal.commit(turn(&journal, "one")).await.expect("stored");
    let mut other = open(store.clone(), None).await;
    other.commit(turn(&other, "theirs")).await.expect("stored");
    let refused = journal.commit(turn(&journal, "mine")).await;
    assert!(
        matches!(&refused, Err(Error::Store { source, .. }) if matches!(**source, StoreError::Conflict { .. })),
        "{refused:?}"
    );
    assert_eq!(
        shown(&journal),
        ["one", "theirs"],
        "reloaded: the store's view"
    );
    assert!(journal.is_settled());
    journal
        .commit(turn(&journal, "next"))
        .await
        .expect("stored");
    assert_eq!(stored(store.as_ref()).await, ["one", "theirs", "next"]);
}

#[tokio::test]
async fn a_conflict_whose_reload_fails_leaves_the_journal_stale_until_it_can() {
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let mut journal = open(faulty.clone(), None).await;
    let mut other = open(faulty.inner().clone(), None).await;
    other.commit(turn(&other, "theirs")).await.expect("stored");
    faulty.fail_next_loads(1);
    assert!(journal.commit(turn(&journal, "mine")).await.is_err());
    assert!(!journal.is_settled(), "stale: nothing may build on it");
    assert!(shown(&journal).is_empty());
    journal.settle().await.expect("reloaded");
    assert_eq!(shown(&journal), ["theirs"]);
}

#[tokio::test(start_paused = true)]
async fn a_write_refused_as_not_the_owners_loses_the_lease_and_shows_nothing() {
    let memory = InMemoryStore::new();
    let leases = memory.leases().expect("memory leases");
    let store: Arc<dyn Store> = Arc::new(memory);
    let ttl = Duration::from_secs(10);
    let keeper = Arc::new(LeaseKeeper::new(
        leases.clone(),
        Ownership::new("http://a").with_lease_ttl(ttl),
        "memory",
    ));
    let lease = keeper.acquire(&key()).await.expect("granted");
    let mut journal = open(store.clone(), Some(keeper.clone())).await;
    journal.commit(turn(&journal, "one")).await.expect("stored");
    // The store lost a's lease (a failover, say) and b took the session: a's own deadline has
    // not passed, so it writes, and the store's fence refuses.
    leases.release(&key(), &lease).await.expect("release");
    let b = crate::store::Claimant::new("http://b");
    leases.acquire(&key(), &b, ttl).await.expect("b claims");
    let refused = journal.commit(turn(&journal, "two")).await;
    assert!(
        matches!(&refused, Err(e) if matches!(e.code(), "not_owner" | "fenced")),
        "{refused:?}"
    );
    assert!(journal.lease_lost());
    assert_eq!(shown(&journal), ["one"], "the refused turn is not shown");
    assert_eq!(
        keeper.take_lost(),
        [key()],
        "the keeper has the session stopped"
    );
    let attempted = journal.commit(turn(&journal, "three")).await;
    assert_eq!(attempted.map_err(|e| e.code()), Err("not_owner"));
    assert_eq!(stored(store.as_ref()).await, ["one"]);
}
