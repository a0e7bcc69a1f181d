//! Contract 7: sessions are passivated after their idle TTL and by LRU above the capacity, but
//! never while a turn runs, messages wait, or state is unsaved; a passivated session resumes
//! with its history.
//!
//! Every test runs in paused time: each `sleep` moves the clock past (or short of) the idle TTL,
//! which is the scenario, never a wait for the reaper (that is `eventually`).

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::{EchoAgent, InMemoryStore, Runtime, Store};

const TTL: Duration = Duration::from_secs(60);

fn runtime(store: Arc<dyn Store>, capacity: usize) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .with_idle_ttl(TTL)
        .with_capacity(capacity)
        .with_capacity_wait(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// An idle session stays live until its TTL has passed since its last turn, then goes.
#[tokio::test(start_paused = true)]
async fn an_idle_session_is_passivated_after_its_ttl_and_not_before() {
    let rt = runtime(Arc::new(InMemoryStore::new()), 100);
    let k = key("erin", "idle");
    rt.call(&k, "one").await.unwrap();
    tokio::time::sleep(TTL / 2).await;
    rt.call(&k, "two").await.unwrap();
    // The TTL counts from the last turn: at 1.25 TTL after the first call it is still live.
    tokio::time::sleep(TTL * 3 / 4).await;
    assert_eq!(rt.live_sessions(), 1, "passivated before its TTL");
    tokio::time::sleep(TTL).await;
    eventually("the idle session to be passivated", || {
        rt.live_sessions() == 0
    })
    .await;
    let stats = rt.stats();
    assert_eq!(stats.evictions_idle, 1);
    assert_eq!(stats.idle_timers, 0, "no idle timer is left behind");
}

/// A session whose turn outlives the TTL is not passivated; it is once it has been idle a TTL.
#[tokio::test(start_paused = true)]
async fn a_busy_session_is_never_passivated() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_idle_ttl(TTL)
        .build()
        .unwrap();
    let k = key("frank", "busy");
    let call = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold long").await }
    });
    eventually("the turn to start", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(TTL * 3).await;
    assert_eq!(
        rt.live_sessions(),
        1,
        "a running turn keeps its session live"
    );
    assert_eq!(rt.stats().evictions_idle, 0);
    agent.gate.add_permits(1);
    within(call).await.unwrap().unwrap();
    tokio::time::sleep(TTL / 2).await;
    assert_eq!(
        rt.live_sessions(),
        1,
        "the TTL counts from the end of the turn"
    );
    tokio::time::sleep(TTL).await;
    eventually("passivation after the turn", || rt.live_sessions() == 0).await;
}

/// Above the capacity, the least recently used idle session makes room; busy ones are skipped.
#[tokio::test(start_paused = true)]
async fn the_least_recently_used_idle_session_makes_room() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_capacity(3)
        .with_capacity_wait(Duration::from_secs(5))
        .build()
        .unwrap();
    let (a, b, c, d, e) = (
        key("g", "a"),
        key("g", "b"),
        key("g", "c"),
        key("g", "d"),
        key("g", "e"),
    );
    // `a` is the least recently used but busy; `b` is the oldest idle one.
    let busy = tokio::spawn({
        let (rt, a) = (rt.clone(), a.clone());
        async move { rt.call(&a, "hold").await }
    });
    eventually("a's turn to start", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    within(rt.call(&b, "x")).await.unwrap();
    within(rt.call(&c, "x")).await.unwrap();
    within(rt.call(&d, "x")).await.unwrap();
    assert_eq!(rt.stats().evictions_lru, 1);
    assert!(rt.live_sessions() <= 3);
    let view_b = rt.state(&b).await.unwrap().unwrap();
    assert!(!view_b.live, "b was evicted");
    assert!(
        rt.state(&a).await.unwrap().unwrap().live,
        "busy a was skipped"
    );
    assert!(rt.state(&c).await.unwrap().unwrap().live);
    agent.gate.add_permits(1);
    within(busy).await.unwrap().unwrap();
    within(rt.call(&e, "x")).await.unwrap();
    assert!(
        !rt.state(&a).await.unwrap().unwrap().live,
        "a, now idle and oldest, went next"
    );
    assert_eq!(rt.stats().peak_live_sessions, 3);
}

/// A passivated session comes back with its history and goes on numbering its events.
#[tokio::test(start_paused = true)]
async fn a_passivated_session_resumes_with_its_history() {
    let store = Arc::new(CountingStore::new(Arc::new(InMemoryStore::new())));
    let rt = runtime(store.clone(), 100);
    let k = key("heidi", "resume");
    rt.call(&k, "before").await.unwrap();
    tokio::time::sleep(TTL * 2).await;
    eventually("passivation", || rt.live_sessions() == 0).await;
    let outcome = rt.call(&k, "after").await.unwrap();
    assert_eq!(outcome.seq, 4);
    let view = rt.state(&k).await.unwrap().unwrap();
    let texts: Vec<_> = view.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(texts, ["before", "before", "after", "after"]);
    assert_eq!(
        store.loads.load(Ordering::SeqCst),
        2,
        "one load per activation"
    );
    assert_dense(&stored_events(store.as_ref(), &k).await);
}
