//! `Runtime::live_page` shows each live session's state (idle, running, queued N, stopping)
//! as it changes, pages through every live session in key order without repeats, and is read
//! while turns run without stopping or reordering them; `Runtime::passivate` stops a live
//! session (its turns finish first) and leaves others alone.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use support::harness::*;
use turnstile::{CallOptions, InMemoryStore, LiveQuery, LiveState, Runtime};

fn runtime(agent: Arc<GateAgent>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store(InMemoryStore::new())
        .build()
        .expect("runtime")
}

fn state_of(rt: &Runtime, user: &str, session: &str) -> Option<LiveState> {
    let page = rt.live_page(&LiveQuery {
        user: Some(user.into()),
        ..LiveQuery::default()
    });
    page.sessions
        .into_iter()
        .find(|s| s.key.session_id() == session)
        .map(|s| s.state)
}

#[tokio::test]
async fn states_follow_running_and_queued_turns_and_passivation() {
    let agent = Arc::new(GateAgent::default());
    let rt = runtime(agent.clone());
    let k = key("alice", "s");
    within(rt.call(&k, "warm up")).await.expect("first turn");
    assert_eq!(state_of(&rt, "alice", "s"), Some(LiveState::Idle));
    let page = rt.live_page(&LiveQuery::default());
    assert_eq!(page.sessions[0].turns, 1, "turns of the session so far");
    assert!(page.sessions[0].bytes > 0, "its events have a size");
    assert_eq!(page.sessions[0].unsaved, 0);

    let calls = spawn_calls(
        &rt,
        &k,
        &["hold 1", "hold 2", "hold 3"],
        CallOptions::default(),
    );
    eventually("the first held turn runs", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    eventually("two wait behind it", || {
        state_of(&rt, "alice", "s") == Some(LiveState::Queued(2))
    })
    .await;
    agent.gate.add_permits(2);
    eventually("one turn left, running", || {
        state_of(&rt, "alice", "s") == Some(LiveState::Running)
    })
    .await;
    assert!(rt.passivate(&k), "a live session can be passivated");
    assert_eq!(state_of(&rt, "alice", "s"), Some(LiveState::Stopping));
    assert!(!rt.passivate(&k), "a stopping session is not live");
    agent.gate.add_permits(1);
    let answers = within(calls).await.expect("calls");
    assert!(
        answers.iter().all(Result::is_ok),
        "passivation lets turns finish: {answers:?}"
    );
    eventually("the passivated session leaves the live list", || {
        state_of(&rt, "alice", "s").is_none()
    })
    .await;
    assert_eq!(rt.stats().turns, 4);
    assert_eq!(rt.turn_times().count(), 4);
}

#[tokio::test]
async fn pages_cover_every_live_session_once_while_turns_run() {
    // Property: reading pages in a loop while 400 turns run over 40 sessions neither blocks nor
    // loses a turn, and every page is in key order with no key seen twice per pass.
    let agent = Arc::new(GateAgent::default());
    let rt = runtime(agent);
    let mut calls = Vec::new();
    for user in 0..4 {
        for session in 0..10 {
            let k = key(&format!("u{user}"), &format!("s{session:02}"));
            let inputs: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
            let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            calls.push(spawn_calls(&rt, &k, &inputs, CallOptions::default()));
        }
    }
    let reader = {
        let rt = rt.clone();
        tokio::spawn(async move {
            let mut passes = 0;
            loop {
                let mut seen = Vec::new();
                let mut after = None;
                loop {
                    let page = rt.live_page(&LiveQuery {
                        user: None,
                        after: after.clone(),
                        limit: 7,
                    });
                    seen.extend(page.sessions.iter().map(|s| s.key.clone()));
                    match page.next {
                        Some(next) => after = Some(next),
                        None => break,
                    }
                }
                assert!(
                    seen.windows(2).all(|w| w[0] < w[1]),
                    "key order, no repeats"
                );
                passes += 1;
                if seen.len() == 40 && passes > 3 {
                    return passes;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    for call in calls {
        let answers = within(call).await.expect("calls");
        assert!(answers.iter().all(Result::is_ok));
    }
    let passes = within(reader).await.expect("the reader");
    assert!(passes > 3);
    let alice_like = rt.live_page(&LiveQuery {
        user: Some("u2".into()),
        after: None,
        limit: 0,
    });
    assert_eq!(
        alice_like.sessions.len(),
        10,
        "a user filter reads that user only"
    );
    assert!(alice_like.sessions.iter().all(|s| s.key.user_id() == "u2"));
    assert_eq!(alice_like.total, 40);
    assert_eq!(rt.stats().turns, 400);
}
