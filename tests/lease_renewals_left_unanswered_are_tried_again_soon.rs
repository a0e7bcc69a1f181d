//! The renewer tries a renewal batch again soon after it left a held lease unanswered, so that
//! a store that does not answer for a moment — a batch that timed out, a connection replaced
//! meanwhile — costs no session its lease, and a batch that waited long for its answers is
//! followed at once. Paused time; a session takes a turn every half second all along, as a busy
//! one does, and every turn must be answered.

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{key, LeasesView};
use tokio::time::Instant;
use turnstile::config::Ownership;
use turnstile::store::{ForwardingLeases, Lease, Leases, Renewal};
use turnstile::{EchoAgent, InMemoryStore, Runtime, SessionKey, Store, StoreError};

const LEASE_TTL: Duration = Duration::from_secs(10);

/// Leases whose renewals, while the time since `start` is inside one of `windows` (seconds),
/// wait `wait` and then fail, as a store that does not answer.
struct UnansweredAt {
    inner: Arc<dyn Leases>,
    start: Instant,
    windows: Vec<(f64, f64)>,
    wait: Duration,
}

#[async_trait]
impl ForwardingLeases for UnansweredAt {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        let at = self.start.elapsed().as_secs_f64();
        if self.windows.iter().any(|&(from, to)| at >= from && at < to) {
            tokio::time::sleep(self.wait).await;
            return Err(StoreError::Unavailable {
                backend: "test",
                detail: "not answering".into(),
            });
        }
        self.inner.renew(leases, ttl).await
    }
}

/// Starts a runtime whose renewals go unanswered in `windows` (seconds from its start), then
/// sends a session a turn every half second for twice the TTL: returns the first turn that was
/// not answered (its time and error code), if any.
async fn first_unanswered_turn(windows: Vec<(f64, f64)>, wait: Duration) -> Option<(f64, String)> {
    let shared: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let start = Instant::now();
    let leases = Arc::new(UnansweredAt {
        inner: shared.leases().expect("memory leases"),
        start,
        windows,
        wait,
    });
    let view: Arc<dyn Store> = Arc::new(LeasesView {
        inner: shared,
        leases,
    });
    let rt = Runtime::builder()
        .agent(EchoAgent)
        .store_arc(view)
        .with_ownership(Ownership::new("http://a").with_lease_ttl(LEASE_TTL))
        .build()
        .expect("runtime");
    let k = key("alice", "busy");
    let mut turn = 0;
    while start.elapsed() < LEASE_TTL * 2 {
        turn += 1;
        if let Err(error) = rt.call(&k, format!("t{turn}")).await {
            return Some((start.elapsed().as_secs_f64(), error.code().to_owned()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

#[tokio::test(start_paused = true)]
async fn two_short_outages_in_a_row_cost_no_lease() {
    // Rounds on the thirds alone fall at 3.3 s and 6.7 s, both unanswered: the lease would run
    // out at 8 s. Tried again a tenth of the TTL later, 5.3 s and 7.7 s are answered.
    let unanswered = first_unanswered_turn(vec![(3.0, 4.5), (6.5, 7.0)], Duration::ZERO).await;
    assert_eq!(unanswered, None);
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_waited_long_is_followed_at_once() {
    // The round at 3.3 s waits 4 s for nothing. A retry timed from its end (8.3 s) would come
    // after the lease's local deadline (8 s); the next third (6.7 s) has passed by then, so the
    // next round goes at once, at 7.3 s, and is answered.
    let unanswered = first_unanswered_turn(vec![(3.0, 3.5)], Duration::from_secs(4)).await;
    assert_eq!(unanswered, None);
}
