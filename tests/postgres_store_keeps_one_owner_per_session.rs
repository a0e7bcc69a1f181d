//! Two runtimes with ownership on one PostgreSQL schema (two pools, as two processes would
//! have) hold each session in one place: the second is told who owns it and runs nothing; once
//! the owner drains, the second takes the session over with its whole history.
#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::harness::{key, stored_inputs, within, TIMEOUT};
use support::postgres::TestDatabase;
use turnstile::backend::PostgresOptions;
use turnstile::config::Ownership;
use turnstile::{EchoAgent, Error, Placement, Runtime, Store};

fn runtime(store: Arc<dyn Store>, address: &str) -> Runtime {
    Runtime::builder()
        .agent(EchoAgent)
        .store_arc(store)
        .with_ownership(Ownership::new(address).with_lease_ttl(Duration::from_secs(5)))
        .build()
        .expect("runtime")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_has_one_owner_and_moves_when_it_drains() {
    let database = TestDatabase::create().await;
    let options = PostgresOptions::default().with_schema("owned");
    let store_a: Arc<dyn Store> = Arc::new(database.store_with(options.clone()).await);
    let store_b: Arc<dyn Store> = Arc::new(database.store_with(options).await);
    let a = runtime(store_a, "http://a");
    let b = runtime(store_b.clone(), "http://b");
    let k = key("alice", "pg-owned");

    within(a.call(&k, "one")).await.expect("a serves it");
    match within(b.call(&k, "refused")).await {
        Err(Error::OwnedElsewhere { owner, .. }) => assert_eq!(owner.address, "http://a"),
        other => panic!("expected OwnedElsewhere, got {other:?}"),
    }
    within(a.drain(TIMEOUT)).await;
    assert_eq!(
        b.placement(&k).await.expect("placement"),
        Placement::Unowned
    );
    let two = within(b.call(&k, "two")).await.expect("b takes it over");
    assert_eq!(two.seq, 4);
    let inputs: Vec<String> = stored_inputs(store_b.as_ref(), &k)
        .await
        .into_iter()
        .map(|(text, _)| text)
        .collect();
    assert_eq!(inputs, ["one", "two"]);
}
