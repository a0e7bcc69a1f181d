//! Several runtimes sharing one store hold each session in one place at a time: the others are
//! told who owns it, a session moves when its owner lets it go, and an owner that lost its lease
//! can never commit. These runtimes share a memory store in one process, the way processes share
//! a Redis; `tests/cluster_*.rs` run the same protocol across real processes.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{eventually_ok, key, stored_inputs, within, GateAgent, TIMEOUT};
use turnstile::config::Ownership;
use turnstile::store::{ForwardingLeases, Lease, Leases, Renewal};
use turnstile::{
    EchoAgent, Error, InMemoryStore, Placement, Runtime, SessionKey, Store, StoreError,
};

const LEASE_TTL: Duration = Duration::from_millis(400);

fn runtime(store: Arc<dyn Store>, address: &str, agent: Arc<dyn turnstile::Agent>) -> Runtime {
    Runtime::builder()
        .agent_arc(agent)
        .store_arc(store)
        .with_ownership(Ownership::new(address).with_lease_ttl(LEASE_TTL))
        .build()
        .expect("runtime")
}

/// A second runtime is told who owns a live session, and nothing runs there; once the owner
/// passivates the session (and gives its lease back), the second takes it over with its whole
/// history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_runtime_is_told_the_owner_and_takes_over_after_passivation() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let a = runtime(store.clone(), "http://a", Arc::new(EchoAgent));
    let b = runtime(store.clone(), "http://b", Arc::new(EchoAgent));
    let k = key("alice", "moves");

    within(a.call(&k, "one")).await.expect("a serves it");
    assert_eq!(a.placement(&k).await.expect("placement"), Placement::Here);
    match within(b.call(&k, "refused")).await {
        Err(Error::OwnedElsewhere { owner, .. }) => assert_eq!(owner.address, "http://a"),
        other => panic!("expected OwnedElsewhere, got {other:?}"),
    }
    match b.placement(&k).await.expect("placement") {
        Placement::Elsewhere(owner) => assert_eq!(owner.address, "http://a"),
        other => panic!("expected Elsewhere, got {other:?}"),
    }
    assert_eq!(a.leases_held(), 1);
    assert_eq!(b.leases_held(), 0);

    within(a.drain(TIMEOUT)).await;
    assert_eq!(
        a.leases_held(),
        0,
        "a drained runtime gives its leases back"
    );
    assert_eq!(
        b.placement(&k).await.expect("placement"),
        Placement::Unowned
    );
    let outcome = within(b.call(&k, "two")).await.expect("b takes it over");
    assert_eq!(outcome.seq, 4, "b continues a's history");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["one", "two"], "nothing ran on b while a owned it");
}

/// Lease operations that a test can cut off, as a network partition would.
struct Partitionable {
    inner: Arc<dyn Leases>,
    cut: AtomicBool,
    renewals: AtomicUsize,
}

#[async_trait]
impl ForwardingLeases for Partitionable {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn renew(
        &self,
        leases: &[(SessionKey, Lease)],
        ttl: Duration,
    ) -> Result<Vec<Renewal>, StoreError> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        if self.cut.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable {
                backend: "test",
                detail: "partitioned".into(),
            });
        }
        self.inner.renew(leases, ttl).await
    }
}

/// An owner cut off from the store while a turn runs: its lease expires, another runtime takes
/// the session and serves turns; the cut-off owner's turn is then refused (its caller gets an
/// error, never an acknowledgement) and nothing it did after losing the lease is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_lost_its_lease_never_commits() {
    let shared: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let leases = Arc::new(Partitionable {
        inner: shared.leases().expect("memory leases"),
        cut: AtomicBool::new(false),
        renewals: AtomicUsize::new(0),
    });
    let view: Arc<dyn Store> = Arc::new(support::harness::LeasesView {
        inner: shared.clone(),
        leases: leases.clone(),
    });
    let gate = Arc::new(GateAgent::default());
    let a = runtime(view, "http://a", gate.clone());
    let b = runtime(shared.clone(), "http://b", Arc::new(EchoAgent));
    let k = key("alice", "partitioned");

    within(a.call(&k, "before")).await.expect("a serves it");
    let held = {
        let a = a.clone();
        let k = k.clone();
        tokio::spawn(async move { a.call(&k, "hold: cut off mid-turn").await })
    };
    support::harness::eventually("a's turn is running", || {
        gate.entered.load(Ordering::SeqCst) == 1
    })
    .await;
    leases.cut.store(true, Ordering::SeqCst);

    // b is refused while a's lease lasts, then takes the session over.
    let taken = eventually_ok(
        "b to take the session over",
        Duration::from_millis(20),
        || async {
            match b.call(&k, "after").await {
                Ok(outcome) => Ok(outcome),
                Err(refused @ Error::OwnedElsewhere { .. }) => Err(refused),
                Err(other) => panic!("b: {other}"),
            }
        },
    )
    .await;
    assert_eq!(
        taken.seq, 4,
        "b builds on what a stored before it was cut off"
    );

    // a's turn ends (the lease loss interrupted it, or the gate lets it go): refused.
    gate.gate.add_permits(1);
    let answer = within(held).await.expect("task");
    match answer {
        Err(err) => assert_eq!(err.code(), "not_owner", "{err}"),
        Ok(outcome) => panic!("a turn without the lease was acknowledged: {outcome:?}"),
    }
    let inputs: Vec<String> = stored_inputs(shared.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(
        inputs,
        ["before", "after"],
        "nothing of a's after it lost the lease"
    );
    assert!(leases.renewals.load(Ordering::SeqCst) > 0);
    support::harness::eventually("a let the session go", || !a.is_live(&k)).await;
    assert_eq!(a.leases_held(), 0);
}

/// An idle owner whose renewals fail (cut off from the store) lets its session go once its lease
/// lapses locally, without any write to find out: another runtime can then take it over, and
/// nothing held here outlives the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_owner_cut_off_from_the_store_lets_its_session_go() {
    let shared: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let leases = Arc::new(Partitionable {
        inner: shared.leases().expect("memory leases"),
        cut: AtomicBool::new(false),
        renewals: AtomicUsize::new(0),
    });
    let view: Arc<dyn Store> = Arc::new(support::harness::LeasesView {
        inner: shared.clone(),
        leases: leases.clone(),
    });
    let a = runtime(view, "http://a", Arc::new(EchoAgent));
    let k = key("alice", "idle-cut-off");
    within(a.call(&k, "before")).await.expect("a serves it");
    leases.cut.store(true, Ordering::SeqCst);
    support::harness::eventually("the idle session to stop", || !a.is_live(&k)).await;
    assert_eq!(a.leases_held(), 0);
    assert!(leases.renewals.load(Ordering::SeqCst) > 0);
}

/// Three runtimes, many sessions, several callers per session, every call sent to a random
/// runtime and, when refused as owned elsewhere, to the owner it names (as `serve` forwards):
/// sessions move between runtimes as they passivate, yet every turn runs once and is stored
/// once, each caller's turns in its order, and no session is ever live in two runtimes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_move_between_runtimes_without_loss_duplication_or_overlap() {
    const SESSIONS: usize = 30;
    const CALLERS: usize = 3;
    const TURNS: usize = 8;
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let runtimes: Vec<Runtime> = ["http://a", "http://b", "http://c"]
        .iter()
        .map(|address| {
            Runtime::builder()
                .agent(EchoAgent)
                .store_arc(store.clone())
                .with_idle_ttl(Duration::from_millis(3))
                .with_ownership(Ownership::new(*address).with_lease_ttl(Duration::from_secs(5)))
                .build()
                .expect("runtime")
        })
        .collect();
    let by_address: Arc<HashMap<String, Runtime>> = Arc::new(
        runtimes
            .iter()
            .map(|rt| (rt.address().expect("address").to_owned(), rt.clone()))
            .collect(),
    );
    let keys: Vec<SessionKey> = (0..SESSIONS).map(|s| key("u", &format!("s{s}"))).collect();

    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (runtimes, keys, done) = (runtimes.clone(), keys.clone(), done.clone());
        tokio::spawn(async move {
            let mut samples = 0u64;
            while !done.load(Ordering::SeqCst) {
                for k in &keys {
                    let live = runtimes.iter().filter(|rt| rt.is_live(k)).count();
                    assert!(live <= 1, "{k} is live in {live} runtimes at once");
                }
                samples += 1;
                tokio::task::yield_now().await;
            }
            samples
        })
    };

    let forwarded = Arc::new(AtomicUsize::new(0));
    let mut callers = Vec::new();
    for k in &keys {
        for c in 0..CALLERS {
            let (k, by_address, forwarded) = (k.clone(), by_address.clone(), forwarded.clone());
            let runtimes = runtimes.clone();
            callers.push(tokio::spawn(async move {
                for t in 0..TURNS {
                    let input = format!("c{c}-t{t}");
                    let mut rt = runtimes[(c + t) % runtimes.len()].clone();
                    let mut hops = 0;
                    loop {
                        match rt.call(&k, input.clone()).await {
                            Ok(_) => break,
                            Err(Error::OwnedElsewhere { owner, .. }) if hops < 50 => {
                                hops += 1;
                                forwarded.fetch_add(1, Ordering::Relaxed);
                                rt = by_address[&owner.address].clone();
                            }
                            Err(other) => panic!("{k} {input}: {other}"),
                        }
                    }
                }
            }));
        }
    }
    for caller in callers {
        within(caller).await.expect("caller");
    }
    done.store(true, Ordering::SeqCst);
    let samples = within(sampler).await.expect("sampler");
    assert!(samples > 0);

    for k in &keys {
        let inputs: Vec<String> = stored_inputs(store.as_ref(), k)
            .await
            .into_iter()
            .map(|(text, _)| text)
            .collect();
        assert_eq!(inputs.len(), CALLERS * TURNS, "{k}: {inputs:?}");
        for c in 0..CALLERS {
            let mine: Vec<&String> = inputs
                .iter()
                .filter(|i| i.starts_with(&format!("c{c}-")))
                .collect();
            let expected: Vec<String> = (0..TURNS).map(|t| format!("c{c}-t{t}")).collect();
            assert_eq!(
                mine,
                expected.iter().collect::<Vec<_>>(),
                "{k}: caller {c}'s turns, once each, in order"
            );
        }
        support::harness::assert_dense(&support::harness::stored_events(store.as_ref(), k).await);
    }
    assert!(
        forwarded.load(Ordering::Relaxed) > 0,
        "calls reached non-owners (the test exercised forwarding)"
    );
}
