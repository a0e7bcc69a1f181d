//! A connection that is replaced when it stops answering, and the watchdog that replaces it.
//!
//! The Redis Cluster client of the `redis` crate (1.8) can stop answering for good after a node
//! goes away. While it rebuilds its slot map it drives nothing else; a command that queued for
//! the client's internal lock just before the rebuild began is handed the lock without being
//! driven, and the rebuild waits for that command forever. From then on every command of the
//! process waits, those for healthy nodes too, and so every lease of the process lapses — one
//! node's failure spread to every session. (Seen on a real cluster in about one kill of a
//! master in four under light load: `tests/redis_cluster_a_node_down_stops_only_its_own_sessions.rs`.)
//!
//! Nothing outside the client can unwedge it, but it can be replaced: the watchdog sends a
//! `PING` through the connection every so often; a ping that times out (an error that came back
//! from a node is an answer: the client is alive) has a fresh connection made, and once that
//! one answers a ping of its own, every clone of the connection sends through it. Commands
//! already waiting on the stuck one meet their own deadlines; the stuck client is dropped with
//! the last of them. A fresh connection that cannot be made, or does not answer either, is
//! dropped and the old one kept: a cluster that is slow or down everywhere is not the client's
//! fault, and replacing it would only add connections.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;

/// A connection shared by every clone of a store, which the watchdog may replace.
pub(crate) struct Healing<C> {
    current: RwLock<C>,
    /// How many times the connection was replaced.
    replaced: AtomicU64,
}

impl<C: Clone> Healing<C> {
    pub(crate) fn new(conn: C) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(conn),
            replaced: AtomicU64::new(0),
        })
    }

    /// The connection to send the next command through.
    pub(crate) fn current(&self) -> C {
        self.current.read().clone()
    }

    /// How many times the connection was replaced since it was made.
    #[cfg(test)]
    fn replaced(&self) -> u64 {
        self.replaced.load(Ordering::Relaxed)
    }

    fn replace(&self, fresh: C) {
        *self.current.write() = fresh;
        self.replaced.fetch_add(1, Ordering::Relaxed);
    }
}

/// How often the watchdog pings and how long it waits for an answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    /// The pause between an answered ping and the next.
    pub(crate) every: Duration,
    /// How long a ping may go unanswered before the connection counts as stuck; also the
    /// limit for a fresh connection's first ping.
    pub(crate) limit: Duration,
    /// How long making a fresh connection may take.
    pub(crate) connect: Duration,
}

/// What became of one ping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Answered.
    Answered,
    /// Refused, or an error came back (a node down, the cluster down): the connection is alive.
    Failed,
    /// No answer within the connection's own response timeout.
    Silent,
}

/// Watches `healing` until it is dropped: `ping` sends one ping through a connection, `connect`
/// makes a fresh connection. A ping that is [`Probe::Silent`], or not back within the limit,
/// has a fresh connection made; it replaces the old one if its own ping is answered.
pub(crate) async fn watchdog<C, P, PF, N, NF, E>(
    healing: Weak<Healing<C>>,
    watch: Watch,
    ping: P,
    connect: N,
) where
    C: Clone,
    P: Fn(C) -> PF,
    PF: Future<Output = Probe>,
    N: Fn() -> NF,
    NF: Future<Output = Result<C, E>>,
    E: std::fmt::Display,
{
    loop {
        tokio::time::sleep(watch.every).await;
        let Some(conn) = healing.upgrade().map(|h| h.current()) else {
            return;
        };
        let probe = tokio::time::timeout(watch.limit, ping(conn.clone())).await;
        if !matches!(probe, Err(_) | Ok(Probe::Silent)) {
            continue;
        }
        tracing::warn!(
            limit = ?watch.limit,
            "redis cluster: the connection did not answer a ping in time; connecting afresh"
        );
        // Meanwhile the old one is asked once more: it may have been only slow (a long slot
        // refresh), and is then kept, so that no command of its can still be on its way while
        // the next goes by a new one.
        let again = tokio::time::timeout(watch.limit, ping(conn));
        let (fresh, again) = tokio::join!(answering(&watch, &ping, &connect), again);
        let fresh = match fresh {
            Ok(fresh) => fresh,
            Err(why) => {
                tracing::warn!(%why, "redis cluster: no fresh connection; the old one is kept");
                continue;
            }
        };
        if matches!(again, Ok(Probe::Answered)) {
            tracing::info!("redis cluster: the connection answers again; kept");
            continue;
        }
        let Some(healing) = healing.upgrade() else {
            return;
        };
        healing.replace(fresh);
        metrics::counter!("turnstile_redis_cluster_replaced_total").increment(1);
        tracing::warn!("redis cluster: the connection that stopped answering was replaced");
    }
}

/// A fresh connection that answered a ping, or why there is none.
async fn answering<C, P, PF, N, NF, E>(watch: &Watch, ping: &P, connect: &N) -> Result<C, String>
where
    C: Clone,
    P: Fn(C) -> PF,
    PF: Future<Output = Probe>,
    N: Fn() -> NF,
    NF: Future<Output = Result<C, E>>,
    E: std::fmt::Display,
{
    let fresh = match tokio::time::timeout(watch.connect, connect()).await {
        Ok(Ok(fresh)) => fresh,
        Ok(Err(error)) => return Err(error.to_string()),
        Err(_) => return Err(format!("not connected within {:?}", watch.connect)),
    };
    match tokio::time::timeout(watch.limit, ping(fresh.clone())).await {
        Ok(Probe::Answered) => Ok(fresh),
        _ => Err("the fresh connection did not answer a ping either".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A connection whose pings never finish once it is stuck.
    #[derive(Clone)]
    struct Fake {
        id: u64,
        stuck: Arc<AtomicBool>,
    }

    impl Fake {
        fn new(id: u64) -> Self {
            Self {
                id,
                stuck: Arc::default(),
            }
        }
    }

    /// A stuck fake answers nothing; the first one times out on its own (as the cluster
    /// client does), later ones hang.
    async fn ping(conn: Fake) -> Probe {
        if !conn.stuck.load(Ordering::SeqCst) {
            return Probe::Answered;
        }
        if conn.id == 1 {
            tokio::time::sleep(WATCH.limit / 2).await;
            return Probe::Silent;
        }
        std::future::pending().await
    }

    const WATCH: Watch = Watch {
        every: Duration::from_millis(100),
        limit: Duration::from_millis(300),
        connect: Duration::from_secs(1),
    };

    /// Lets the watchdog run for `span` of paused time.
    async fn run_for(span: Duration) {
        let until = tokio::time::Instant::now() + span;
        while tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Connection 1, stuck or not, under watch; and a count for the fresh ones made.
    fn watched(stuck: bool) -> (Fake, Arc<Healing<Fake>>, Arc<AtomicU64>) {
        let first = Fake::new(1);
        first.stuck.store(stuck, Ordering::SeqCst);
        let healing = Healing::new(first.clone());
        (first, healing, Arc::new(AtomicU64::new(0)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_stops_answering_is_replaced_by_one_that_answers() {
        let first = Fake::new(1);
        let healing = Healing::new(first.clone());
        let made = Arc::new(AtomicU64::new(1));
        let counter = Arc::clone(&made);
        tokio::spawn(watchdog(Arc::downgrade(&healing), WATCH, ping, move || {
            let id = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok::<_, String>(Fake::new(id)) }
        }));
        run_for(Duration::from_secs(2)).await;
        assert_eq!(healing.current().id, 1, "an answering connection is kept");
        assert_eq!(made.load(Ordering::SeqCst), 1, "and nothing else is made");
        first.stuck.store(true, Ordering::SeqCst);
        run_for(WATCH.every + WATCH.limit + Duration::from_millis(50)).await;
        assert_eq!(healing.current().id, 2, "the stuck one is replaced");
        assert_eq!(healing.replaced(), 1);
        run_for(Duration::from_secs(2)).await;
        assert_eq!(healing.current().id, 2, "the fresh one answers and stays");
        assert_eq!(healing.replaced(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_old_connection_is_kept_while_no_fresh_one_answers() {
        let (_, healing, attempts) = watched(true);
        let counter = Arc::clone(&attempts);
        let fresh_answers = Arc::new(AtomicBool::new(false));
        let answering = Arc::clone(&fresh_answers);
        tokio::spawn(watchdog(Arc::downgrade(&healing), WATCH, ping, move || {
            let attempt = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let fresh = Fake::new(1 + attempt);
            let answers = answering.load(Ordering::SeqCst);
            fresh.stuck.store(!answers, Ordering::SeqCst);
            async move {
                if attempt % 2 == 1 {
                    Err("connection refused".to_string())
                } else {
                    Ok(fresh)
                }
            }
        }));
        run_for(Duration::from_secs(5)).await;
        let tried = attempts.load(Ordering::SeqCst);
        assert!(
            tried >= 4,
            "fresh connections were tried again and again: {tried}"
        );
        assert_eq!(
            healing.current().id,
            1,
            "none that failed or hung replaced it"
        );
        assert_eq!(healing.replaced(), 0);
        fresh_answers.store(true, Ordering::SeqCst);
        run_for(Duration::from_secs(3)).await;
        assert_ne!(healing.current().id, 1, "one that answers does");
        assert_eq!(healing.replaced(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_answers_again_before_the_swap_is_kept() {
        let (first, healing, attempts) = watched(true);
        let counter = Arc::clone(&attempts);
        tokio::spawn(watchdog(Arc::downgrade(&healing), WATCH, ping, move || {
            counter.fetch_add(1, Ordering::SeqCst);
            // Its slot refresh ends while the fresh connection is made.
            first.stuck.store(false, Ordering::SeqCst);
            async { Ok::<_, String>(Fake::new(2)) }
        }));
        run_for(Duration::from_secs(3)).await;
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            1,
            "one fresh connection made"
        );
        assert_eq!(
            healing.current().id,
            1,
            "the old one answered again and stays"
        );
        assert_eq!(healing.replaced(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_whose_pings_come_back_failed_is_alive_and_kept() {
        let healing = Healing::new(Fake::new(1));
        let attempts = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&attempts);
        let failing = |_: Fake| async { Probe::Failed };
        tokio::spawn(watchdog(
            Arc::downgrade(&healing),
            WATCH,
            failing,
            move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, String>(Fake::new(2)) }
            },
        ));
        run_for(Duration::from_secs(3)).await;
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            0,
            "no fresh connection made"
        );
        assert_eq!(healing.current().id, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_ends_with_its_connection() {
        let healing = Healing::new(Fake::new(1));
        let watchdog = tokio::spawn(watchdog(Arc::downgrade(&healing), WATCH, ping, || async {
            Ok::<_, String>(Fake::new(2))
        }));
        drop(healing);
        tokio::time::timeout(WATCH.every * 2, watchdog)
            .await
            .expect("the watchdog ends")
            .expect("without a panic");
    }
}
