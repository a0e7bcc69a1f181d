//! Implementing the `Store` trait: a small store over a `BTreeMap`, checked by the same
//! conformance suite every built-in store passes.
//!
//! Run it with `cargo run --example custom_store --features testing` (the conformance suite comes
//! with the `testing` feature). `cargo test --all-features` runs the suite on it too (the example
//! is declared with `test = true` in `Cargo.toml`; see the test at the end).
//!
//! A real store would talk to a database; what matters is the contract each method documents:
//! compare-and-set on the session's version, appends that continue the log, shared `user:` and
//! `app:` state kept once, listings that never read events, and deletes that touch one user only.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use turnstile::state::{apply_plain, Event, Seq, SessionRecord, SplitDelta, StateMap};
use turnstile::store::{
    conformance, GcPolicy, GcReport, LoadedSession, Page, PageRequest, SessionMeta, MAX_PAGE,
};
use turnstile::{SessionKey, Store, StoreError};

/// One session as kept by [`BTreeStore`].
struct Stored {
    record: SessionRecord,
    events: Vec<Event>,
}

#[derive(Default)]
struct Data {
    /// Ordered by (user, session), so a user's sessions are one range.
    sessions: BTreeMap<(String, String), Stored>,
    users: BTreeMap<String, StateMap>,
    app: StateMap,
}

/// Everything in one `BTreeMap` behind one lock: simple, and enough for a demo.
#[derive(Default)]
struct BTreeStore {
    data: Mutex<Data>,
}

fn id(key: &SessionKey) -> (String, String) {
    (key.user_id().to_owned(), key.session_id().to_owned())
}

#[async_trait]
impl Store for BTreeStore {
    fn name(&self) -> &'static str {
        "btree"
    }

    async fn load(&self, key: &SessionKey, window: usize) -> Result<LoadedSession, StoreError> {
        let data = self.data.lock();
        let (record, events) = match data.sessions.get(&id(key)) {
            Some(s) => {
                let start = s.events.len().saturating_sub(window);
                (Some(s.record.clone()), s.events[start..].to_vec())
            }
            None => (None, Vec::new()),
        };
        let user_state = if key.is_anonymous() {
            StateMap::new()
        } else {
            data.users.get(key.user_id()).cloned().unwrap_or_default()
        };
        Ok(LoadedSession {
            record,
            events,
            user_state,
            app_state: data.app.clone(),
        })
    }

    async fn append(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        let mut data = self.data.lock();
        let found = data.sessions.get(&id(key)).map_or(0, |s| s.record.version);
        if found != base_version {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: base_version,
                found,
            });
        }
        // Check everything before changing anything: a failed call leaves the store as it was.
        let next_seq = data.sessions.get(&id(key)).map_or(1, |s| s.record.next_seq);
        for (expected, event) in (next_seq..).zip(events) {
            if event.seq != expected {
                return Err(StoreError::InvalidRequest(format!(
                    "session {key}: seq {} does not continue the log at {expected}",
                    event.seq
                )));
            }
        }
        let mut shared = SplitDelta::default();
        let now = events.first().map_or(0, |e| e.at_ms);
        let stored = data.sessions.entry(id(key)).or_insert_with(|| Stored {
            record: SessionRecord::new(key.clone(), now),
            events: Vec::new(),
        });
        for event in events {
            stored.record.apply(event);
            if let Some(delta) = &event.state_delta {
                shared.merge(SplitDelta::from_delta(delta));
            }
        }
        stored.events.extend_from_slice(events);
        stored.record.version += 1;
        let version = stored.record.version;
        if !key.is_anonymous() {
            apply_plain(
                data.users.entry(key.user_id().to_owned()).or_default(),
                &shared.user,
            );
        }
        apply_plain(&mut data.app, &shared.app);
        Ok(version)
    }

    async fn read_events(
        &self,
        key: &SessionKey,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let data = self.data.lock();
        Ok(data.sessions.get(&id(key)).map_or_else(Vec::new, |s| {
            s.events
                .iter()
                .filter(|e| e.seq >= from)
                .take(limit)
                .cloned()
                .collect()
        }))
    }

    async fn delete(&self, key: &SessionKey) -> Result<bool, StoreError> {
        Ok(self.data.lock().sessions.remove(&id(key)).is_some())
    }

    async fn list(&self, user_id: &str, page: &PageRequest) -> Result<Page, StoreError> {
        if page.limit == 0 || page.limit > MAX_PAGE {
            return Err(StoreError::InvalidRequest(format!(
                "bad page limit {}",
                page.limit
            )));
        }
        let data = self.data.lock();
        // The cursor is the last session id of the previous page.
        let after = page.cursor.clone().unwrap_or_default();
        let mut sessions: Vec<SessionMeta> = data
            .sessions
            .range((user_id.to_owned(), after.clone())..)
            .take_while(|((user, _), _)| user == user_id)
            .filter(|((_, session), _)| page.cursor.is_none() || *session > after)
            .take(page.limit + 1)
            .map(|(_, s)| SessionMeta::of(&s.record))
            .collect();
        let next_cursor = (sessions.len() > page.limit).then(|| {
            sessions.truncate(page.limit);
            sessions
                .last()
                .map(|m| m.key.session_id().to_owned())
                .unwrap_or_default()
        });
        Ok(Page {
            sessions,
            next_cursor,
        })
    }

    async fn delete_user(&self, user_id: &str) -> Result<u64, StoreError> {
        let mut data = self.data.lock();
        let before = data.sessions.len();
        data.sessions.retain(|(user, _), _| user != user_id);
        data.users.remove(user_id);
        Ok((before - data.sessions.len()) as u64)
    }

    async fn gc(&self, policy: &GcPolicy, now_ms: u64) -> Result<GcReport, StoreError> {
        let mut data = self.data.lock();
        let mut by_age: Vec<(u64, SessionKey)> = data
            .sessions
            .values()
            .map(|s| (s.record.updated_ms, s.record.key.clone()))
            .collect();
        by_age.sort();
        let max_age_ms = policy
            .max_age
            .map_or(u64::MAX, |d: Duration| d.as_millis() as u64);
        let cutoff = now_ms.saturating_sub(max_age_ms);
        let mut removed: Vec<SessionKey> = by_age
            .iter()
            .filter(|(at, _)| *at < cutoff)
            .map(|(_, k)| k.clone())
            .collect();
        let left = by_age.len() - removed.len();
        if let Some(max) = policy.max_sessions {
            let excess = left.saturating_sub(max);
            removed.extend(
                by_age
                    .iter()
                    .filter(|(at, _)| *at >= cutoff)
                    .take(excess)
                    .map(|(_, k)| k.clone()),
            );
        }
        for key in &removed {
            data.sessions.remove(&id(key));
        }
        Ok(GcReport { removed })
    }
}

/// Runs turnstile's store conformance suite on [`BTreeStore`]. Each check gets a fresh, empty
/// store; a broken property panics with its name.
async fn check_conformance() {
    conformance::run_all(|| async { Arc::new(BTreeStore::default()) as Arc<dyn Store> }).await;
    // One process holds this store, so its second handle is the same store.
    conformance::run_two_handles(|| async {
        let store: Arc<dyn Store> = Arc::new(BTreeStore::default());
        (store.clone(), store)
    })
    .await;
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    check_conformance().await;
    println!("BTreeStore passes the turnstile store conformance suite");

    // A store that passes can back a runtime like any built-in one.
    let runtime = turnstile::Runtime::builder()
        .agent(turnstile::EchoAgent)
        .store(BTreeStore::default())
        .build()
        .expect("a runtime");
    let key = SessionKey::new("dana", "demo").expect("a valid key");
    let outcome = runtime.call(&key, "hello").await.expect("a turn");
    println!("echo: {} (event #{})", outcome.output, outcome.seq);
    runtime.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_btree_store_passes_the_conformance_suite() {
        check_conformance().await;
    }
}
