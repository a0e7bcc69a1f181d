//! A session that another process takes between this process's look-up (no owner) and its
//! activation is answered `owned_elsewhere` here — nothing ran — and the gateway forwards the
//! request to the new owner, whose answer the client gets.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use support::gateways::Gateways;
use support::harness::{key, stored_inputs, within};
use support::http::ALICE;
use turnstile::http::{HttpConfig, SERVED_BY_HEADER};
use turnstile::store::{ForwardingLeases, Leases, Owner};
use turnstile::{EchoAgent, InMemoryStore, SessionKey, Store, StoreError};

/// Leases whose `owner` look-ups answer "nobody" (as a read just before another process's
/// acquire would), counting them; everything else is the real thing.
struct StaleOwner {
    inner: Arc<dyn Leases>,
    lookups: AtomicUsize,
}

#[async_trait]
impl ForwardingLeases for StaleOwner {
    fn forward_to(&self) -> &dyn Leases {
        self.inner.as_ref()
    }

    async fn owner(&self, _key: &SessionKey) -> Result<Option<Owner>, StoreError> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        Ok(None)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_taken_during_the_lookup_is_forwarded_to_its_new_owner() {
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let stale = Arc::new(StaleOwner {
        inner: store.leases().expect("the memory store keeps leases"),
        lookups: AtomicUsize::new(0),
    });
    let view: Arc<dyn Store> = Arc::new(support::harness::LeasesView {
        inner: store.clone(),
        leases: stale.clone(),
    });
    let config = HttpConfig {
        forward: true,
        ..HttpConfig::default()
    };
    let cluster = Gateways::start_over(
        store.clone(),
        vec![view, store.clone()],
        Arc::new(EchoAgent),
        Duration::from_secs(5),
        config,
    )
    .await;
    let [a, b] = &cluster.members[..] else {
        unreachable!()
    };
    let k = key("alice", "raced");
    within(b.runtime().call(&k, "b holds it"))
        .await
        .expect("b takes the session");

    let response = within(
        reqwest::Client::new()
            .post(a.url("/v1/sessions/alice/raced/turns"))
            .bearer_auth(ALICE)
            .json(&json!({ "input": "sent to a" }))
            .send(),
    )
    .await
    .expect("a answers");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let served_by = response.headers()[SERVED_BY_HEADER]
        .to_str()
        .expect("ASCII");
    assert_eq!(served_by, b.base, "the new owner served it");
    let body: Value = within(response.json()).await.expect("a JSON body");
    assert_eq!(body["seq"], 4);
    assert!(
        stale.lookups.load(Ordering::SeqCst) >= 1,
        "a looked the owner up"
    );
    assert!(!a.runtime().is_live(&k), "nothing ran at a");
    let inputs: Vec<String> = stored_inputs(store.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["b holds it", "sent to a"]);
    cluster.stop().await;
}
