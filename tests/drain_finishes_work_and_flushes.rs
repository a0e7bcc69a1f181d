//! Contract 9: drain refuses new calls, lets running and queued turns finish, interrupts what is
//! left at its deadline (persisting `shutdown_interrupted`), flushes and stops every session.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use support::harness::*;
use turnstile::state::InterruptReason;
use turnstile::store::FaultyStore;
use turnstile::{Error, InMemoryStore, OutcomeKind, Runtime, Store};

fn runtime(agent: Arc<GateAgent>, store: Arc<dyn Store>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store_arc(store)
        .build()
        .unwrap()
}

/// Starts a turn that waits at the agent's gate, once it is running.
async fn hold_a_turn(
    rt: &Runtime,
    agent: &GateAgent,
    k: &turnstile::SessionKey,
) -> tokio::task::JoinHandle<turnstile::Result<turnstile::Outcome>> {
    let before = agent.entered.load(Ordering::SeqCst);
    let running = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold on").await }
    });
    eventually("the turn to run", || {
        agent.entered.load(Ordering::SeqCst) == before + 1
    })
    .await;
    running
}

/// Starts a drain with `deadline`, once it has begun.
async fn begin_drain(
    rt: &Runtime,
    deadline: Duration,
) -> tokio::task::JoinHandle<turnstile::DrainReport> {
    let drain = tokio::spawn({
        let rt = rt.clone();
        async move { rt.drain(deadline).await }
    });
    eventually("the drain to begin", || rt.is_draining()).await;
    drain
}

#[tokio::test(start_paused = true)]
async fn drain_lets_in_flight_and_queued_turns_finish() {
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent.clone(), store.clone());
    let keys: Vec<_> = (0..5).map(|i| key("kim", &format!("s{i}"))).collect();
    let mut calls = Vec::new();
    for k in &keys {
        for input in ["hold first", "hold queued"] {
            let (rt, k) = (rt.clone(), k.clone());
            calls.push(tokio::spawn(async move { rt.call(&k, input).await }));
        }
    }
    eventually("five turns running", || {
        agent.entered.load(Ordering::SeqCst) == 5
    })
    .await;
    let drain = tokio::spawn({
        let rt = rt.clone();
        async move { rt.drain(Duration::from_secs(60)).await }
    });
    // A probe admitted before the drain began simply runs (on its own session); once the drain
    // has begun, every new call is refused at once.
    let probe = key("kim", "probe");
    eventually("drain to refuse new calls", || {
        futures::FutureExt::now_or_never(rt.call(&probe, "a probe"))
            .is_some_and(|r| matches!(r, Err(Error::Draining)))
    })
    .await;
    agent.gate.add_permits(10);
    for call in calls {
        let outcome = within(call).await.unwrap().unwrap();
        assert_eq!(outcome.kind, OutcomeKind::Completed);
    }
    let report = within(drain).await.unwrap();
    assert!(report.clean);
    assert_eq!(rt.live_sessions(), 0);
    for k in &keys {
        assert_eq!(
            stored_inputs(store.as_ref(), k).await.len(),
            2,
            "{k}: all flushed"
        );
    }
    assert!(matches!(
        rt.call(&keys[1], "after").await,
        Err(Error::Draining)
    ));
}

#[tokio::test(start_paused = true)]
async fn at_the_deadline_running_turns_are_interrupted_and_marked() {
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent.clone(), store.clone());
    let k = key("leo", "stuck");
    let running = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold forever").await }
    });
    let queued = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold never runs").await }
    });
    eventually("the turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    let report = within(rt.drain(Duration::from_secs(5))).await;
    assert!(report.clean);
    let outcome = within(running).await.unwrap().unwrap();
    assert_eq!(
        outcome.kind,
        OutcomeKind::Interrupted(InterruptReason::Shutdown)
    );
    assert_eq!(
        outcome.output, "working on hold forever",
        "partial output is kept"
    );
    let never = within(queued).await.unwrap();
    assert!(matches!(never, Err(Error::Draining)), "{never:?}");
    let stored = store.load(&k, 10).await.unwrap().record.unwrap();
    assert!(stored.shutdown_interrupted);
    assert_eq!(stored.stats.interrupted, 1);
}

#[tokio::test(start_paused = true)]
async fn a_session_activated_during_the_drain_does_not_hold_it_up() {
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let earlier = runtime(agent.clone(), store.clone());
    let idle = key("mia", "stored");
    within(earlier.call(&idle, "hello")).await.unwrap();
    within(earlier.shutdown()).await;

    let rt = runtime(agent.clone(), store.clone());
    let busy = key("mia", "busy");
    let running = hold_a_turn(&rt, &agent, &busy).await;
    let deadline = Duration::from_secs(60);
    let begun = tokio::time::Instant::now();
    let drain = begin_drain(&rt, deadline).await;
    // Not a turn, so the drain admits it: it activates the stored session.
    within(rt.clear_context(&idle)).await.unwrap();
    agent.gate.add_permits(1);
    assert_eq!(
        within(running).await.unwrap().unwrap().kind,
        OutcomeKind::Completed
    );
    let report = within(drain).await.unwrap();
    assert!(report.clean, "{report:?}");
    assert!(
        begun.elapsed() < deadline,
        "the drain waited {:?} for a session activated while it ran",
        begun.elapsed()
    );
    assert_eq!(rt.live_sessions(), 0);
}

#[tokio::test(start_paused = true)]
async fn past_the_deadline_a_turn_held_by_a_loading_session_never_starts() {
    // The session's load outlasts the drain's deadline: the turn it holds is answered
    // `Draining` instead of starting after the deadline, and the drain leaves nothing behind.
    let agent = Arc::new(GateAgent::default());
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    faulty.delay_loads(Some(Duration::from_secs(8)));
    let rt = runtime(agent.clone(), faulty.clone());
    let k = key("ola", "slow-load");
    let call = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.call(&k, "hold until released").await }
    });
    eventually("the session to be loading", || rt.live_sessions() == 1).await;
    let report = within(rt.drain(Duration::from_secs(5))).await;
    assert_eq!(report.left, 0, "{report:?}");
    let answer = within(call).await.unwrap();
    assert!(matches!(answer, Err(Error::Draining)), "{answer:?}");
    assert_eq!(
        agent.entered.load(Ordering::SeqCst),
        0,
        "the turn never started"
    );
    assert_eq!(rt.live_sessions(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_delete_during_the_drain_runs_once_and_the_drain_ends_early() {
    // A delete held behind a session the drain is stopping runs in one more activation, and
    // that activation stops after it: no passivation left over makes the session come back.
    let agent = Arc::new(GateAgent::default());
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let rt = runtime(agent.clone(), store.clone());
    let k = key("ida", "deleted-while-draining");
    let running = hold_a_turn(&rt, &agent, &k).await;
    let deadline = Duration::from_secs(60);
    let begun = tokio::time::Instant::now();
    let drain = begin_drain(&rt, deadline).await;
    let delete = tokio::spawn({
        let (rt, k) = (rt.clone(), k.clone());
        async move { rt.delete(&k).await }
    });
    // Let the delete reach the registry, which holds it for the session's next activation.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    agent.gate.add_permits(1);
    assert_eq!(
        within(running).await.unwrap().unwrap().kind,
        OutcomeKind::Completed
    );
    assert!(
        within(delete).await.unwrap().unwrap(),
        "the session existed"
    );
    let report = within(drain).await.unwrap();
    assert!(report.clean, "{report:?}");
    assert!(
        begun.elapsed() < deadline,
        "the drain waited {:?}",
        begun.elapsed()
    );
    assert_eq!(
        rt.stats().activations,
        2,
        "one activation for the delete, no more"
    );
    assert!(store.load(&k, 10).await.unwrap().record.is_none());
}
