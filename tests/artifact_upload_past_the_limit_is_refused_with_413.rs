//! An artifact upload is read as a stream and refused with 413 `too_large` as soon as it passes
//! the store's limit: a body that never ends gets its answer without the server reading more
//! than about the limit, and a declared `Content-Length` past the limit is refused before any
//! of the body is read. Nothing is stored.
#![cfg(feature = "http")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::stream;
use turnstile::artifact::{ArtifactScope, MemoryArtifactStore};
use turnstile::{ArtifactStore, EchoAgent, Runtime};

use support::harness::within;
use support::http::{Served, ALICE};

/// The limit the test store is given.
const LIMIT: u64 = 1024 * 1024;
/// One chunk of the endless upload.
const CHUNK: usize = 64 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_upload_is_answered_413_after_the_limit() {
    let artifacts: Arc<dyn ArtifactStore> =
        Arc::new(MemoryArtifactStore::new().with_max_bytes(LIMIT));
    let runtime = Runtime::builder()
        .agent(EchoAgent)
        .store(turnstile::MemoryStore::new())
        .with_artifacts(artifacts.clone())
        .build()
        .expect("runtime");
    let router = turnstile::channel::ChannelRouter::new(
        runtime,
        turnstile::channel::MemoryPairingStore::new(),
    );
    let gateway = turnstile::http::Gateway::new(router).with_tokens(support::http::tokens());
    let served = Served::start(gateway).await;

    // A body that never ends on its own, counting what the server pulled from it.
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let endless = stream::repeat_with(move || {
        counter.fetch_add(CHUNK as u64, Ordering::Relaxed);
        Ok::<_, std::io::Error>(vec![b'x'; CHUNK])
    });
    let client = reqwest::Client::new();
    let response = within(
        client
            .put(served.url("/v1/sessions/alice/s1/artifacts/huge.bin"))
            .bearer_auth(ALICE)
            .header("content-type", "application/octet-stream")
            .body(reqwest::Body::wrap_stream(endless))
            .send(),
    )
    .await
    .expect("the server answers before the body ends");
    assert_eq!(response.status(), 413);
    let body: serde_json::Value = response.json().await.expect("a JSON error");
    assert_eq!(body["error"]["code"], "too_large");
    let pulled = sent.load(Ordering::Relaxed);
    assert!(
        pulled < 32 * LIMIT,
        "the server stopped reading near the limit, not after {pulled} bytes"
    );

    // A declared length past the limit is refused before the body is read.
    let response = client
        .put(served.url("/v1/sessions/alice/s1/artifacts/huge.bin"))
        .bearer_auth(ALICE)
        .body(vec![0u8; usize::try_from(LIMIT).unwrap() + 1])
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 413);

    let scope = ArtifactScope::Session(turnstile::SessionKey::new("alice", "s1").unwrap());
    assert!(
        artifacts.list(&scope).await.unwrap().is_empty(),
        "nothing stored"
    );
    served.stop().await;
}
