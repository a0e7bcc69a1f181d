//! Property: a PostgreSQL that is not there makes `connect` answer `Unavailable` within its
//! connect timeout — never a hang, never another error.
#![cfg(feature = "postgres")]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use turnstile::backend::{PostgresOptions, PostgresStore};
use turnstile::StoreError;

/// Generous bound for "quickly": the configured timeouts below are 300 ms.
const BOUND: Duration = Duration::from_secs(3);

fn options() -> PostgresOptions {
    PostgresOptions::default()
        .with_connect_timeout(Duration::from_millis(300))
        .with_response_timeout(Duration::from_millis(300))
}

fn assert_unavailable_quickly(result: Result<PostgresStore, StoreError>, started: Instant) {
    assert!(
        matches!(
            result,
            Err(StoreError::Unavailable {
                backend: "postgres",
                ..
            })
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn connecting_to_a_port_nobody_listens_on_fails_quickly() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let started = Instant::now();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    assert_unavailable_quickly(PostgresStore::connect(&url, options()).await, started);
}

#[tokio::test]
async fn a_server_that_accepts_but_never_answers_is_unavailable_not_a_hang() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // Accepts connections and holds them open without ever replying.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(16) {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    assert_unavailable_quickly(PostgresStore::connect(&url, options()).await, started);
}
