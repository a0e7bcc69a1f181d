//! Property: the commit markers the file store writes into its log (the session's version on the
//! last line of each append) never reach the caller: every event `load` and `read_events` return,
//! from a running store or a reopened one, is exactly the event appended — including fields from
//! a newer writer, one of them named like the marker, and text that looks like one.

mod support;

use serde_json::json;
use turnstile::backend::FileStore;
use turnstile::state::{Author, Event, EventKind};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::{find_one, temp_file_store};

fn key() -> SessionKey {
    SessionKey::new("erin", "s").expect("valid key")
}

/// Appends of one, two and three events, with awkward contents; returns every event in order.
fn appends() -> Vec<Vec<Event>> {
    let note = |seq: u64, text: &str| {
        Event::new(
            seq,
            Author::System,
            5_000 + seq,
            EventKind::Note {
                text: text.to_owned(),
            },
        )
    };
    let mut one = vec![note(1, "{\"_v\":1,\"seq\":1}\n{\"_v\":2,")];
    one[0].extra.insert("_v".to_owned(), json!(41));
    let mut two = turn_events(2, "second", None);
    two[1].extra.insert("_v".to_owned(), json!("not a marker"));
    two[1]
        .extra
        .insert("written_by_v9".to_owned(), json!([1, 2]));
    let mut three = vec![note(4, "a"), note(5, "b"), note(6, "c")];
    three[2].extra.insert("zzz".to_owned(), json!({"_v": 3}));
    let four = turn_events(7, "", None);
    vec![one, two, three, four]
}

#[tokio::test]
async fn loads_and_reads_return_exactly_what_was_appended() {
    let (dir, store) = temp_file_store();
    let appends = appends();
    let mut version = 0;
    for events in &appends {
        version = store.append(&key(), version, events).await.expect("append");
    }
    let all: Vec<Event> = appends.into_iter().flatten().collect();
    store.settle_files().await.expect("settle");
    let log = std::fs::read_to_string(find_one(dir.path(), "log.jsonl")).expect("read log");
    let marked = log.lines().filter(|l| l.starts_with("{\"_v\":")).count();
    assert_eq!(
        marked, 4,
        "each append's last line carries a marker:\n{log}"
    );

    assert_returns_exactly(&store, version, &all).await;
    drop(store);
    let reopened = FileStore::open(dir.path()).expect("reopen");
    assert_returns_exactly(&reopened, version, &all).await;
}

/// Every window and every page of `store`'s session is the matching slice of `all`.
async fn assert_returns_exactly(store: &FileStore, version: u64, all: &[Event]) {
    for window in 0..=all.len() + 1 {
        let loaded = store.load(&key(), window).await.expect("load");
        assert_eq!(loaded.events, all[all.len().saturating_sub(window)..]);
        assert_eq!(loaded.record.expect("head").version, version);
    }
    for from in 1..=all.len() as u64 + 1 {
        let read = store
            .read_events(&key(), from, usize::MAX)
            .await
            .expect("read");
        assert_eq!(read, all[from as usize - 1..]);
    }
}
