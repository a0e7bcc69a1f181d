//! Contract 6: the number of live sessions never passes the capacity, and nothing per key is
//! left behind once sessions are gone.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::{EchoAgent, Error, InMemoryStore, Runtime};

const KEYS: usize = 100_000;
const CAPACITY: usize = 1_000;

/// 100,000 distinct keys through a capacity of 1,000 with waiting callers: all served, the live
/// count never above 1,000, and after shutdown no slot or idle timer remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_keys_pass_through_a_thousand_slots() {
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store(InMemoryStore::new())
        .with_capacity(CAPACITY)
        .with_capacity_wait(Duration::from_secs(60))
        .build()
        .unwrap();
    let workers = 64;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..KEYS).step_by(workers) {
                let k = key(&format!("u{}", i % 100), &format!("s{i}"));
                rt.call(&k, "hello").await.expect("call");
                assert!(rt.live_sessions() <= CAPACITY);
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(300), task)
            .await
            .expect("finishes")
            .unwrap();
    }
    let stats = rt.stats();
    assert!(stats.peak_live_sessions <= CAPACITY, "{stats:?}");
    assert_eq!(stats.activations, KEYS as u64);
    // A session asked to passivate counts as evicted at once but holds its slot until its
    // actor has stopped: wait for the last ones, then every activation but the live ones was
    // evicted exactly once.
    eventually("evicted sessions to finish stopping", || {
        let stats = rt.stats();
        stats.evictions_lru as usize == KEYS - stats.live_sessions
    })
    .await;
    let report = within(rt.shutdown()).await;
    assert!(report.clean);
    let stats = rt.stats();
    assert_eq!(stats.live_sessions, 0, "no slot left behind");
    assert_eq!(stats.idle_timers, 0, "no idle timer left behind");
}

/// With no wait configured, a call beyond the capacity is refused at once with `AtCapacity`
/// while the busy sessions hold every slot.
#[tokio::test(start_paused = true)]
async fn a_full_runtime_of_busy_sessions_refuses_with_at_capacity() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_capacity(2)
        .build()
        .unwrap();
    let mut busy = Vec::new();
    for s in ["a", "b"] {
        let (rt, k) = (rt.clone(), key("u", s));
        busy.push(tokio::spawn(async move { rt.call(&k, "hold").await }));
    }
    eventually("both turns running", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) == 2
    })
    .await;
    let refused = rt.call(&key("u", "c"), "x").await;
    assert!(
        matches!(refused, Err(Error::AtCapacity { capacity: 2 })),
        "{refused:?}"
    );
    agent.gate.add_permits(2);
    for task in busy {
        within(task).await.unwrap().unwrap();
    }
    assert_eq!(rt.stats().rejected_capacity, 1);
}

/// Calls of one session that wait for a free slot run in the order they entered the runtime.
/// (That a newcomer cannot overtake them as the slot frees is shown next to the registry.)
#[tokio::test(start_paused = true)]
async fn callers_waiting_for_a_slot_keep_their_sessions_order() {
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn turnstile::Store> = Arc::new(InMemoryStore::new());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store_arc(store.clone())
        .with_capacity(1)
        .with_capacity_wait(Duration::from_secs(3600))
        .with_idle_ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    let busy = tokio::spawn({
        let rt = rt.clone();
        async move { rt.call(&key("ann", "busy"), "hold the only slot").await }
    });
    eventually("the only slot to be busy", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let k = key("ann", "waiting");
    let mut calls = Vec::new();
    for i in 0..8 {
        let (rt, k) = (rt.clone(), k.clone());
        calls.push(tokio::spawn(
            async move { rt.call(&k, format!("m{i}")).await },
        ));
        // Let this call enter the runtime (and find it full) before the next one is made.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
    agent.gate.add_permits(1);
    within(busy).await.unwrap().unwrap();
    for call in calls {
        within(call)
            .await
            .unwrap()
            .expect("served once a slot freed");
    }
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    let expected: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    assert_eq!(inputs, expected);
}

/// A call waiting for a slot gets one when a busy session goes idle, well before that
/// session's idle TTL: it looks again now and then, and evicts the idle session.
#[tokio::test(start_paused = true)]
async fn a_waiting_call_takes_the_slot_of_a_session_that_went_idle() {
    let agent = Arc::new(GateAgent::default());
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .with_capacity(1)
        .with_capacity_wait(Duration::from_secs(60))
        .with_idle_ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let busy = tokio::spawn({
        let rt = rt.clone();
        async move { rt.call(&key("bo", "busy"), "hold the only slot").await }
    });
    eventually("the only slot to be busy", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    let waiting = tokio::spawn({
        let rt = rt.clone();
        async move { rt.call(&key("bo", "waiting"), "let me in").await }
    });
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    agent.gate.add_permits(1);
    within(busy).await.unwrap().unwrap();
    let begun = tokio::time::Instant::now();
    within(waiting)
        .await
        .unwrap()
        .expect("served once the busy session went idle");
    assert!(
        begun.elapsed() < Duration::from_secs(1),
        "waited {:?}",
        begun.elapsed()
    );
}
