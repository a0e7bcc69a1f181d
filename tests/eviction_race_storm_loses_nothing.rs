//! Contracts 1, 3 and 7 together: with sessions evicted and re-activated constantly while many
//! callers use them, every session's stored history is exactly its acknowledged turns, each
//! caller's in its order, none lost or duplicated.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::{InMemoryStore, MockLlmAgent, Runtime, SessionKey, Store};

const SESSIONS: usize = 200;
const CALLERS: usize = 32;
const CALLS_PER_CALLER: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_evictions_and_activations_loses_no_turn() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent(MockLlmAgent::new().with_chunks(2))
        .store_arc(store.clone())
        .with_capacity(10)
        .with_capacity_wait(Duration::from_secs(30))
        .with_idle_ttl(Duration::from_millis(1))
        .build()
        .unwrap();
    let keys: Vec<SessionKey> = (0..SESSIONS)
        .map(|i| key(&format!("user{}", i % 7), &format!("s{i}")))
        .collect();
    let mut callers = Vec::new();
    for c in 0..CALLERS {
        let (rt, keys) = (rt.clone(), keys.clone());
        callers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            // A small deterministic generator so that runs are reproducible.
            let mut x = (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for i in 0..CALLS_PER_CALLER {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = &keys[(x % SESSIONS as u64) as usize];
                let input = format!("c{c}-{i}");
                rt.call(k, input.clone())
                    .await
                    .expect("every call succeeds");
                acked.push((k.clone(), input));
            }
            acked
        }));
    }
    let mut acked_by_key: HashMap<SessionKey, Vec<String>> = HashMap::new();
    for caller in callers {
        for (k, input) in within(caller).await.unwrap() {
            acked_by_key.entry(k).or_default().push(input);
        }
    }
    let stats = rt.stats();
    assert!(stats.peak_live_sessions <= 10, "{stats:?}");
    assert!(
        stats.activations > SESSIONS as u64,
        "sessions were re-activated: {stats:?}"
    );
    for (k, acked) in &acked_by_key {
        let events = stored_events(store.as_ref(), k).await;
        assert_dense(&events);
        let stored: Vec<String> = stored_inputs(store.as_ref(), k)
            .await
            .into_iter()
            .map(|(text, _)| text)
            .collect();
        let mut sorted_stored = stored.clone();
        let mut sorted_acked = acked.clone();
        sorted_stored.sort();
        sorted_acked.sort();
        assert_eq!(sorted_stored, sorted_acked, "{k}: lost or duplicated turns");
        // Each caller's own messages appear in the order it sent them.
        for c in 0..CALLERS {
            let prefix = format!("c{c}-");
            let mine: Vec<usize> = stored
                .iter()
                .filter_map(|s| s.strip_prefix(&prefix))
                .map(|n| n.parse().unwrap())
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "{k}: caller {c} reordered"
            );
        }
    }
    let total: usize = acked_by_key.values().map(Vec::len).sum();
    assert_eq!(total, CALLERS * CALLS_PER_CALLER);
}
