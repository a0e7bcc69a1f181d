//! Readiness: whether this runtime can serve turns now. It can't while it drains, nor while its
//! store does not answer: a process cut off from its store (the store down, a partition) would
//! only answer errors, so a load balancer should send its clients elsewhere.
//!
//! A probe task asks the store for one cheap round trip ([`Store::ping`]) every
//! [`RuntimeConfig::store_probe`](crate::RuntimeConfig::store_probe); the runtime is not ready
//! once the store has answered none for [`Readiness::UNANSWERED_PROBES`] probes in a
//! row. Liveness is
//! another matter: a process whose store is down is alive and recovers by itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Whether a runtime can serve turns now ([`Runtime::readiness`](crate::Runtime::readiness)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// It admits turns and its store answers.
    Ready,
    /// It is draining (or shut down) and admits no new turns.
    Draining,
    /// Its store has not answered a probe for `silent` (at least
    /// [`Readiness::UNANSWERED_PROBES`] probes); `error` is what the last probe met. Turns would fail: send them elsewhere.
    StoreUnanswered {
        /// Since the last probe the store answered.
        silent: Duration,
        /// What the last probe met.
        error: String,
    },
}

impl Readiness {
    /// Probes the store may miss in a row before the runtime says it is not ready: one lost
    /// probe (a blip, a slow answer) does not take a process out of a load balancer; three in a
    /// row is a store that is down or a process cut off from it.
    pub const UNANSWERED_PROBES: u32 = 3;

    /// Whether the runtime can serve turns.
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

/// What the probe task last learnt of the store.
pub(crate) struct StoreHealth {
    /// Zero point of `last_answer`.
    epoch: Instant,
    /// When the store last answered a probe, in nanoseconds since `epoch`.
    last_answer: AtomicU64,
    /// What the last unanswered probe met.
    last_error: Mutex<Option<String>>,
    /// How often the store is probed.
    interval: Duration,
}

impl StoreHealth {
    /// A store that answered just now (it was opened to build the runtime).
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            epoch: Instant::now(),
            last_answer: AtomicU64::new(0),
            last_error: Mutex::new(None),
            interval,
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The store answered a probe; says so once after probes went unanswered.
    fn answered(&self) {
        self.last_answer.store(self.now(), Ordering::Release);
        if self.last_error.lock().take().is_some() {
            tracing::info!("the store answers the readiness probe again");
        }
    }

    /// A probe went unanswered; the first of a run is logged.
    fn unanswered(&self, error: String) {
        let mut last = self.last_error.lock();
        if last.is_none() {
            tracing::warn!(%error, "the store did not answer a readiness probe");
        }
        *last = Some(error);
    }

    /// The store's side of readiness: `Ready`, or how long it has been silent.
    pub(crate) fn readiness(&self) -> Readiness {
        let last = self.last_answer.load(Ordering::Acquire);
        let silent = Duration::from_nanos(self.now().saturating_sub(last));
        if silent <= self.interval * Readiness::UNANSWERED_PROBES {
            return Readiness::Ready;
        }
        let error = self.last_error.lock().clone();
        Readiness::StoreUnanswered {
            silent,
            error: error.unwrap_or_else(|| "no answer yet".to_owned()),
        }
    }
}

/// Probes `store` every `health.interval`, each probe bounded by the interval, until
/// `shutdown`. A probe that fails is counted in `turnstile_store_errors_total{op="probe"}`.
pub(crate) async fn prober(
    store: Arc<dyn Store>,
    health: Arc<StoreHealth>,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(health.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let probe = tokio::time::timeout(health.interval, store.ping()).await;
        match probe {
            Ok(Ok(())) => health.answered(),
            Ok(Err(error)) => {
                crate::stats::store_error(store.name(), "probe");
                health.unanswered(error.to_string());
            }
            Err(_) => {
                crate::stats::store_error(store.name(), "probe");
                health.unanswered(format!("no answer within {:?}", health.interval));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{FaultyStore, InMemoryStore};

    const INTERVAL: Duration = Duration::from_secs(1);

    /// A store that answers pings only while `up`.
    struct Switch {
        inner: Arc<dyn Store>,
        up: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl crate::store::ForwardingStore for Switch {
        fn forward_to(&self) -> &dyn Store {
            self.inner.as_ref()
        }

        async fn ping(&self) -> Result<(), crate::store::StoreError> {
            if self.up.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(crate::store::StoreError::Unavailable {
                    backend: "test",
                    detail: "down".into(),
                })
            }
        }
    }

    /// A store whose probe never answers (a partition, a stalled node).
    struct Silent {
        inner: Arc<dyn Store>,
    }

    #[async_trait::async_trait]
    impl crate::store::ForwardingStore for Silent {
        fn forward_to(&self) -> &dyn Store {
            self.inner.as_ref()
        }

        async fn ping(&self) -> Result<(), crate::store::StoreError> {
            std::future::pending().await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_never_answers_a_probe_is_not_ready() {
        let silent = Arc::new(Silent {
            inner: Arc::new(InMemoryStore::new()),
        });
        let health = Arc::new(StoreHealth::new(INTERVAL));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(prober(silent, health.clone(), shutdown.clone()));
        tokio::time::sleep(INTERVAL * 2).await;
        assert_eq!(health.readiness(), Readiness::Ready, "within three probes");
        tokio::time::sleep(INTERVAL * 3).await;
        match health.readiness() {
            Readiness::StoreUnanswered { error, .. } => {
                assert!(error.contains("no answer within"), "{error}");
            }
            other => panic!("a store that never answers is not ready: {other:?}"),
        }
        shutdown.cancel();
        task.await.expect("the prober ends on shutdown");
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_silent_for_three_probes_is_not_ready_and_ready_again_once_it_answers() {
        let switch = Arc::new(Switch {
            inner: FaultyStore::new(Arc::new(InMemoryStore::new())),
            up: std::sync::atomic::AtomicBool::new(true),
        });
        let health = Arc::new(StoreHealth::new(INTERVAL));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(prober(switch.clone(), health.clone(), shutdown.clone()));
        tokio::time::sleep(INTERVAL * 5).await;
        assert_eq!(health.readiness(), Readiness::Ready);

        switch.up.store(false, Ordering::SeqCst);
        tokio::time::sleep(INTERVAL * 2).await;
        assert_eq!(health.readiness(), Readiness::Ready, "two missed probes");
        tokio::time::sleep(INTERVAL * 2).await;
        match health.readiness() {
            Readiness::StoreUnanswered { silent, error } => {
                assert!(
                    silent > INTERVAL * Readiness::UNANSWERED_PROBES,
                    "{silent:?}"
                );
                assert!(error.contains("down"), "{error}");
            }
            other => panic!("a silent store is not ready: {other:?}"),
        }

        switch.up.store(true, Ordering::SeqCst);
        tokio::time::sleep(INTERVAL + Duration::from_millis(1)).await;
        assert_eq!(health.readiness(), Readiness::Ready, "one answer is enough");
        shutdown.cancel();
        task.await.expect("the prober ends on shutdown");
    }
}
