//! Property: a store written before commit markers existed — a head rewritten on every append,
//! covering a log of plain event lines — still loads with its versions and state, and takes new
//! appends. Plain lines past such a head were written by an append that never returned `Ok`
//! (the old format renamed the head into place before acknowledging): they are dropped, as an
//! unfinished append is now, and cut off by the next append. Markers of the first marked format
//! (the version alone, no length or CRC) are read too.

mod support;

use std::path::Path;

use serde_json::{json, Value};
use turnstile::backend::FileStore;
use turnstile::state::{Event, StateDelta};
use turnstile::store::conformance::turn_events;
use turnstile::{SessionKey, Store};

use support::stores::find_one;

fn key() -> SessionKey {
    SessionKey::new("frank", "s").expect("valid key")
}

fn turn(seq: u64) -> Vec<Event> {
    let delta: StateDelta = [("n".to_owned(), json!(seq))].into();
    turn_events(seq, &format!("turn {seq}"), Some(delta))
}

/// Writes three turns, then rewrites the files as the old format had them: markers stripped,
/// the head holding the latest version and covering the whole log. Returns the events.
async fn old_format_store(root: &Path) -> Vec<Event> {
    let store = FileStore::open(root).expect("open");
    let turns: Vec<Vec<Event>> = [1, 3, 5].into_iter().map(turn).collect();
    let mut version = 0;
    for events in &turns {
        version = store.append(&key(), version, events).await.expect("append");
    }
    let record = store.load(&key(), 0).await.expect("load").record;
    drop(store);
    let log_path = find_one(root, "log.jsonl");
    let log = std::fs::read_to_string(&log_path).expect("read log");
    let mut plain = String::new();
    for line in log.lines() {
        match line.strip_prefix("{\"_v\":") {
            Some(rest) => {
                // The marker's fields lead the line; the event's own start with `seq`.
                let seq = rest.find("\"seq\"").expect("the event follows its marker");
                plain.push('{');
                plain.push_str(&rest[seq..]);
            }
            None => plain.push_str(line),
        }
        plain.push('\n');
    }
    std::fs::write(&log_path, &plain).expect("write the old log");
    let mut head = serde_json::to_value(record.expect("record")).expect("json");
    assert_eq!(head["version"], json!(version));
    head["log_bytes"] = json!(plain.len());
    std::fs::write(find_one(root, "head.json"), head.to_string()).expect("write the old head");
    turns.into_iter().flatten().collect()
}

#[tokio::test]
async fn an_old_head_and_log_load_and_take_new_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut events = old_format_store(dir.path()).await;
    let store = FileStore::open(dir.path()).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load");
    assert_eq!(loaded.events, events);
    let record = loaded.record.expect("head");
    assert_eq!((record.version, record.next_seq), (3, 7));
    assert_eq!(record.state["n"], json!(5));
    let seventh = turn(7);
    assert_eq!(store.append(&key(), 3, &seventh).await.expect("append"), 4);
    events.extend(seventh);
    drop(store);
    let store = FileStore::open(dir.path()).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load");
    assert_eq!(loaded.events, events);
    assert_eq!(loaded.record.expect("head").version, 4);
    assert_eq!(
        store.read_events(&key(), 1, 100).await.expect("read"),
        events
    );
}

#[tokio::test]
async fn plain_lines_past_an_old_head_are_an_unfinished_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = old_format_store(dir.path()).await;
    let log_path = find_one(dir.path(), "log.jsonl");
    let mut log = std::fs::read(&log_path).expect("read log");
    for event in turn(7) {
        log.extend(serde_json::to_vec(&event).expect("json"));
        log.push(b'\n');
    }
    std::fs::write(&log_path, &log).expect("write log");
    let store = FileStore::open(dir.path()).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load");
    assert_eq!(loaded.events, events, "the unacknowledged turn is dropped");
    let record = loaded.record.expect("head");
    assert_eq!((record.version, record.next_seq), (3, 7));
    store
        .append(&key(), 3, &turn_events(7, "instead", None))
        .await
        .expect("append");
    let read = store.read_events(&key(), 7, 100).await.expect("read");
    let texts: Vec<&str> = read.iter().filter_map(Event::text).collect();
    assert_eq!(texts, ["instead", "re: instead"]);
    store.settle_files().await.expect("settle");
    let head: Value =
        serde_json::from_slice(&std::fs::read(find_one(dir.path(), "head.json")).expect("read"))
            .expect("json");
    assert_eq!(
        head["version"],
        json!(3),
        "the old head stays until it is due"
    );
}

/// Rewrites every commit marker of the log at `root` as the first marked format had it: the
/// version alone (`{"_v":N,`), without the append's length and CRC; and moves the head's
/// `log_bytes` to the same line boundary in the shorter log.
fn strip_checks(root: &Path) {
    let log_path = find_one(root, "log.jsonl");
    let head_path = find_one(root, "head.json");
    let mut head: Value =
        serde_json::from_slice(&std::fs::read(&head_path).expect("read head")).expect("json");
    let covered = head["log_bytes"].as_u64().expect("log_bytes") as usize;
    let log = std::fs::read_to_string(&log_path).expect("read log");
    let (mut old_len, mut out, mut new_covered) = (0, String::new(), None);
    for line in log.lines() {
        match line.find(",\"_len\":") {
            Some(at) if line.starts_with("{\"_v\":") => {
                let seq = line.find("\"seq\"").expect("the event follows its marker");
                out.push_str(&line[..=at]);
                out.push_str(&line[seq..]);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
        old_len += line.len() + 1;
        if old_len == covered {
            new_covered = Some(out.len());
        }
    }
    assert!(!out.contains("\"_crc\""));
    head["log_bytes"] = json!(new_covered.expect("the head ends on a line boundary"));
    std::fs::write(&log_path, out).expect("write log");
    std::fs::write(&head_path, head.to_string()).expect("write head");
}

#[tokio::test]
async fn markers_without_a_length_and_crc_past_the_head_still_load() {
    // The first build with commit markers wrote only the version; its unheaded appends must
    // still be folded in.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(dir.path()).expect("open");
    let mut events = Vec::new();
    let mut version = 0;
    for seq in [1, 3, 5] {
        let turn = turn(seq);
        version = store.append(&key(), version, &turn).await.expect("append");
        events.extend(turn);
    }
    drop(store);
    strip_checks(dir.path());
    let head: Value =
        serde_json::from_slice(&std::fs::read(find_one(dir.path(), "head.json")).expect("read"))
            .expect("json");
    assert_eq!(head["version"], json!(1), "two appends lie past the head");
    let store = FileStore::open(dir.path()).expect("reopen");
    let loaded = store.load(&key(), 100).await.expect("load");
    assert_eq!(loaded.events, events);
    let record = loaded.record.expect("head");
    assert_eq!((record.version, record.state["n"].clone()), (3, json!(5)));
    let seventh = turn(7);
    assert_eq!(store.append(&key(), 3, &seventh).await.expect("append"), 4);
    events.extend(seventh);
    drop(store);
    let store = FileStore::open(dir.path()).expect("reopen");
    assert_eq!(
        store.read_events(&key(), 1, 100).await.expect("read"),
        events
    );
}
