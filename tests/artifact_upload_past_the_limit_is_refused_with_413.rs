//! An artifact upload is read as a stream and refused with 413 `too_large` as soon as it passes
//! the store's limit: a body that never ends gets its answer without the server reading more
//! than about the limit, and a declared `Content-Length` past the limit is refused before any
//! of the body is read. Nothing is stored.
#![cfg(feature = "http")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
        .store(turnstile::InMemoryStore::new())
        .with_artifacts(artifacts.clone())
        .build()
        .expect("runtime");
    let router = turnstile::channel::ChannelRouter::new(
        runtime,
        turnstile::channel::MemoryPairingStore::new(),
    );
    let gateway = turnstile::http::Gateway::new(router).with_tokens(support::http::tokens());
    let served = Served::start(gateway).await;

    // A chunked body that never ends on its own, written on a raw connection by one task while
    // this one reads the answer as soon as it comes; the writer counts what it got out.
    let addr = served.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let writing = tokio::spawn(async move {
        let head = format!(
            "PUT /v1/sessions/alice/s1/artifacts/huge.bin HTTP/1.1\r\nhost: {addr}\r\n\
             authorization: Bearer {ALICE}\r\ncontent-type: application/octet-stream\r\n\
             transfer-encoding: chunked\r\n\r\n"
        );
        writer.write_all(head.as_bytes()).await?;
        let mut chunk = format!("{CHUNK:x}\r\n").into_bytes();
        chunk.extend(std::iter::repeat_n(b'x', CHUNK));
        chunk.extend_from_slice(b"\r\n");
        loop {
            writer.write_all(&chunk).await?;
            counter.fetch_add(CHUNK as u64, Ordering::Relaxed);
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    });
    let mut answer = Vec::new();
    within(async {
        let mut buffer = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = reader.read(&mut buffer).await.expect("read the answer");
            assert!(n > 0, "the server closed without answering");
            answer.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    writing.abort();
    let pulled = sent.load(Ordering::Relaxed);
    assert!(
        pulled < 32 * LIMIT,
        "the server stopped reading near the limit, not after {pulled} bytes"
    );
    // A declared length past the limit is refused before the body is read: none is sent.
    let mut stream = tokio::net::TcpStream::connect(served.base.trim_start_matches("http://"))
        .await
        .expect("connect");
    let head = format!(
        "PUT /v1/sessions/alice/s1/artifacts/huge.bin HTTP/1.1\r\nhost: x\r\n\
         authorization: Bearer {ALICE}\r\ncontent-length: {}\r\n\r\n",
        LIMIT + 1
    );
    stream
        .write_all(head.as_bytes())
        .await
        .expect("send the head");
    let mut answer = vec![0u8; 4096];
    let n = within(stream.read(&mut answer))
        .await
        .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("too_large"), "{answer}");

    let scope = ArtifactScope::Session(turnstile::SessionKey::new("alice", "s1").unwrap());
    assert!(
        artifacts.list(&scope).await.unwrap().is_empty(),
        "nothing stored"
    );
    served.stop().await;
}
