//! Contract 2 under faults: a failed or slow save means the turn is not acknowledged and says
//! why; the session keeps its unsaved turn, saves it with the next successful write, and is not
//! passivated meanwhile; nothing is lost or silently reset.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::store::FaultyStore;
use turnstile::{EchoAgent, Error, MemoryStore, Runtime, Store, StoreError};

#[tokio::test(start_paused = true)]
async fn a_failed_save_is_not_acknowledged_and_is_written_by_the_next_one() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let store: Arc<dyn Store> = faulty.clone();
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store.clone())
        .with_idle_ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    let k = key("zoe", "faults");
    rt.call(&k, "one").await.unwrap();
    faulty.fail_next_appends(1);
    match rt.call(&k, "two").await {
        Err(Error::Store { key, source }) => {
            assert_eq!(key, k);
            assert!(
                matches!(*source, StoreError::Unavailable { .. }),
                "{source}"
            );
        }
        other => panic!("a failed save must not be acknowledged: {other:?}"),
    }
    assert_eq!(stored_inputs(faulty.inner().as_ref(), &k).await.len(), 1);
    let view = rt.state(&k).await.unwrap().unwrap();
    assert_eq!(view.unsaved, 2, "the session keeps the unsaved turn");
    // An unsaved session outlives its idle TTL: passivating it would drop the turn.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(rt.live_sessions(), 1);
    rt.call(&k, "three").await.unwrap();
    let inputs: Vec<String> = stored_inputs(faulty.inner().as_ref(), &k)
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        inputs,
        ["one", "two", "three"],
        "the next save wrote the kept turn"
    );
    assert_dense(&stored_events(faulty.inner().as_ref(), &k).await);
    // Paused time past the idle TTL again: saved now, the session may go.
    tokio::time::sleep(Duration::from_secs(5)).await;
    eventually("passivation once saved", || rt.live_sessions() == 0).await;
}

#[tokio::test(start_paused = true)]
async fn a_session_that_cannot_be_loaded_fails_its_calls_and_keeps_its_data() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let store: Arc<dyn Store> = faulty.clone();
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .build()
        .unwrap();
    let k = key("zed", "unloadable");
    rt.call(&k, "kept").await.unwrap();
    rt.shutdown().await;
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    faulty.fail_next_loads(1);
    let failed = rt.call(&k, "lost?").await;
    assert!(
        matches!(failed, Err(Error::Activation { .. })),
        "{failed:?}"
    );
    assert_eq!(rt.live_sessions(), 0, "a failed activation leaves no slot");
    assert_eq!(rt.call(&k, "again").await.unwrap().seq, 4, "history intact");
}

/// A long outage: every failed turn is kept for the next save only up to a bound; past it the
/// session retries the save first and refuses new turns without running their agent. When the
/// store is back, the history holds exactly the turns that ran, in order.
#[tokio::test(start_paused = true)]
async fn an_outage_keeps_a_bounded_backlog_and_runs_no_agent_past_it() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let agent = Arc::new(RecordingAgent::with_latency(Duration::ZERO));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "outage");
    rt.call(&k, "before").await.unwrap();
    faulty.fail_next_appends(usize::MAX);
    for i in 0..200 {
        let refused = rt.call(&k, format!("t{i}")).await;
        assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
    }
    let view = rt.state(&k).await.unwrap().unwrap();
    assert!(
        view.unsaved <= turnstile::config::MAX_UNSAVED_EVENTS + 2,
        "{} events kept in memory",
        view.unsaved
    );
    let ran = agent.started_inputs(&k).len();
    assert!(
        ran < 50,
        "the agent ran {ran} turns against a store that was down"
    );
    // Below the bound the turns ran and were kept (two events each, after "before"): the save
    // is retried ahead of a turn only once the backlog is full.
    assert!(
        ran > turnstile::config::MAX_UNSAVED_EVENTS / 2,
        "only {ran} turns ran before the backlog was full"
    );
    faulty.fail_next_appends(0);
    rt.call(&k, "after").await.unwrap();
    let started = agent.started_inputs(&k);
    let stored: Vec<String> = stored_inputs(faulty.inner().as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        stored, started,
        "every turn that ran is stored, in order; no other"
    );
    assert_dense(&stored_events(faulty.inner().as_ref(), &k).await);
}

/// The same bound when the session never goes idle: two callers keep a turn queued behind the
/// running one, so no new turn ever finds the session idle.
#[tokio::test(start_paused = true)]
async fn an_outage_under_a_steady_queue_keeps_a_bounded_backlog() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let agent = Arc::new(RecordingAgent::with_latency(Duration::from_millis(100)));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(faulty.clone())
        .build()
        .unwrap();
    let k = key("zoe", "busy-outage");
    rt.call(&k, "before").await.unwrap();
    faulty.fail_next_appends(usize::MAX);
    let callers: Vec<_> = (0..2)
        .map(|c| {
            let (rt, k) = (rt.clone(), k.clone());
            tokio::spawn(async move {
                for i in 0..100 {
                    let refused = rt.call(&k, format!("c{c} t{i}")).await;
                    assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
                }
            })
        })
        .collect();
    for caller in callers {
        within(caller).await.unwrap();
    }
    let view = rt.state(&k).await.unwrap().unwrap();
    assert!(
        view.unsaved <= turnstile::config::MAX_UNSAVED_EVENTS + 2,
        "{} events kept in memory",
        view.unsaved
    );
    faulty.fail_next_appends(0);
    rt.call(&k, "after").await.unwrap();
    let stored: Vec<String> = stored_inputs(faulty.inner().as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        stored,
        agent.started_inputs(&k),
        "every turn that ran is stored"
    );
}
