//! Contract 1: turns of different sessions run concurrently.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use support::harness::*;
use tokio::time::Instant;
use turnstile::{InMemoryStore, Runtime};

/// 1,000 sessions whose agent takes 50 ms finish in about 50 ms of (paused) time, not 50 s.
#[tokio::test(start_paused = true)]
async fn a_thousand_sessions_take_one_agent_latency_not_a_thousand() {
    let agent = Arc::new(RecordingAgent::with_latency(Duration::from_millis(50)));
    let rt = Runtime::builder()
        .agent_arc(agent.clone())
        .store(InMemoryStore::new())
        .build()
        .unwrap();
    let keys: Vec<_> = (0..1_000).map(|i| key("u", &format!("s{i}"))).collect();
    let start = Instant::now();
    let outcomes = within(join_all(keys.iter().map(|k| rt.call(k, "hi")))).await;
    let elapsed = start.elapsed();
    assert!(outcomes.iter().all(Result::is_ok));
    assert!(
        elapsed >= Duration::from_millis(50) && elapsed < Duration::from_millis(100),
        "took {elapsed:?}"
    );
    assert_eq!(agent.max_concurrent.load(Ordering::SeqCst), 1_000);
}
