//! Property: a client cannot hold the server's connections by sending slowly or not at all. A
//! connection that sends half a header block (even byte by byte) is closed once the header
//! timeout after its first byte has passed; one that sends nothing is closed after the idle
//! timeout, and never before; a body that stops arriving is answered 408 `body_timeout` within
//! the request timeout; at the connection cap new clients wait for a slot instead of breaking
//! `accept`, and are served once a slow connection is cut. Meanwhile `/healthz` keeps answering,
//! and a streamed reply that pauses longer than every one of these timeouts is not cut.

#![cfg(feature = "http")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use turnstile::http::HttpConfig;
use turnstile::Runtime;

use support::harness::{within, RecordingAgent, TIMEOUT};
use support::http::{client_post, EventReader, Served, TestGateway, ALICE};

const IDLE: Duration = Duration::from_millis(1500);
const HEAD: Duration = Duration::from_millis(500);
const BODY: Duration = Duration::from_millis(700);

fn config(max_connections: usize) -> HttpConfig {
    HttpConfig {
        idle_timeout: IDLE,
        header_timeout: HEAD,
        request_timeout: BODY,
        max_connections,
        ..HttpConfig::default()
    }
}

async fn serve(max_connections: usize, agent: RecordingAgent) -> (Served, Arc<RecordingAgent>) {
    serve_with(config(max_connections), agent).await
}

async fn serve_with(config: HttpConfig, agent: RecordingAgent) -> (Served, Arc<RecordingAgent>) {
    let agent = Arc::new(agent);
    let builder = Runtime::builder().agent_arc(agent.clone());
    let gateway = TestGateway::with(builder, config).gateway;
    (Served::start(gateway).await, agent)
}

async fn connect(served: &Served) -> TcpStream {
    let addr = served.base.trim_start_matches("http://");
    TcpStream::connect(addr)
        .await
        .expect("connect to the gateway")
}

/// Reads until the server closes the connection; returns what it sent and when it closed.
async fn until_closed(mut tcp: TcpStream) -> (String, Instant) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match within(tcp.read(&mut buf)).await {
            Ok(0) | Err(_) => return (String::from_utf8_lossy(&seen).into_owned(), Instant::now()),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// A client that opens a new connection per request: one kept alive in its pool across a pause
/// longer than the server's idle timeout could be closed just as a request goes out on it.
fn fresh_connections() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client")
}

async fn healthz_ok(client: &reqwest::Client, served: &Served) {
    let response = within(client.get(served.url("/healthz")).send())
        .await
        .expect("/healthz answers");
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn half_sent_headers_and_silent_connections_are_closed_on_time() {
    let (served, _) = serve(1000, RecordingAgent::default()).await;
    let client = fresh_connections();
    let mut closings = Vec::new();
    for i in 0..20 {
        let mut tcp = connect(&served).await;
        let opened = Instant::now();
        let half = i % 2 == 0;
        if half {
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .await
                .expect("send half a header block");
        }
        closings.push(tokio::spawn(async move {
            let (_, closed) = until_closed(tcp).await;
            (half, closed - opened)
        }));
    }
    // The slow connections take nothing from the others.
    for _ in 0..5 {
        healthz_ok(&client, &served).await;
    }
    for closing in closings {
        let (half, lasted) = within(closing).await.expect("the reader ran");
        let (least, what) = if half {
            (HEAD, "half a head")
        } else {
            (IDLE, "nothing")
        };
        assert!(
            lasted >= least,
            "a connection that sent {what} was cut after {lasted:?}"
        );
        assert!(
            lasted < TIMEOUT,
            "a connection that sent {what} was held {lasted:?}"
        );
    }
    healthz_ok(&client, &served).await;
    served.stop().await;
}

#[tokio::test]
async fn a_header_block_dripped_byte_by_byte_is_cut_after_the_header_timeout() {
    let (served, _) = serve(1000, RecordingAgent::default()).await;
    let mut tcp = connect(&served).await;
    let started = Instant::now();
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let mut drip = tokio::time::interval(HEAD / 10);
    let mut cut = None;
    for byte in head.iter() {
        drip.tick().await;
        if tcp.write_all(&[*byte]).await.is_err() {
            cut = Some(started.elapsed());
            break;
        }
        let mut probe = [0u8; 64];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::ZERO, tcp.read(&mut probe)).await {
            cut = Some(started.elapsed());
            break;
        }
    }
    let cut = cut.expect("the server cut a header block that took far past the header timeout");
    assert!(cut >= HEAD, "cut after {cut:?}, before the header timeout");
    served.stop().await;
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_408_within_the_request_timeout() {
    let (served, agent) = serve(1000, RecordingAgent::default()).await;
    let mut tcp = connect(&served).await;
    let sent = Instant::now();
    let head = format!(
        "POST /v1/sessions/alice/s/turns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"input\": \"hel"
    );
    tcp.write_all(head.as_bytes())
        .await
        .expect("send a head and part of a body");
    let (answer, closed) = until_closed(tcp).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "answered: {answer}");
    assert!(answer.contains("\"body_timeout\""), "answered: {answer}");
    assert!(closed - sent >= BODY, "answered after {:?}", closed - sent);
    assert!(agent
        .started_inputs(&support::harness::key("alice", "s"))
        .is_empty());
    served.stop().await;
}

#[tokio::test]
async fn at_the_connection_cap_a_new_client_is_served_once_a_slow_one_is_cut() {
    const CAP: usize = 4;
    let (served, _) = serve(CAP, RecordingAgent::default()).await;
    let mut held = Vec::new();
    for _ in 0..CAP {
        let mut tcp = connect(&served).await;
        tcp.write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .expect("half a head");
        held.push(tokio::spawn(until_closed(tcp)));
    }
    let client = fresh_connections();
    healthz_ok(&client, &served).await;
    let answered = Instant::now();
    let mut first_cut = None;
    for closing in held {
        let (_, closed) = within(closing).await.expect("the reader ran");
        first_cut = Some(first_cut.map_or(closed, |t: Instant| t.min(closed)));
    }
    let first_cut = first_cut.expect("connections were held");
    assert!(
        answered >= first_cut,
        "a client past the cap of {CAP} was served while all {CAP} slots were held"
    );
    served.stop().await;
}

#[tokio::test]
async fn a_streamed_reply_that_pauses_longer_than_every_timeout_is_not_cut() {
    // The request timeout (which also bounds a turn's answer) is set apart from the
    // connection's own timeouts, which the reply's silence outlasts.
    let latency = IDLE + HEAD;
    let config = HttpConfig {
        request_timeout: TIMEOUT,
        ..config(1000)
    };
    let (served, _) = serve_with(config, RecordingAgent::with_latency(latency)).await;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let response = client_post(
        &client,
        &served,
        "/v1/sessions/alice/slow/turns",
        ALICE,
        serde_json::json!({"input": "take your time"}),
    )
    .header("accept", "text/event-stream")
    .send()
    .await
    .expect("the turn starts");
    assert_eq!(response.status(), 200);
    let mut events = EventReader::new(response);
    let mut names = Vec::new();
    while let Some((name, _)) = within(events.next()).await {
        names.push(name);
    }
    assert!(
        started.elapsed() >= latency,
        "{:?}: {names:?}",
        started.elapsed()
    );
    assert_eq!(
        names.last().map(String::as_str),
        Some("outcome"),
        "events: {names:?}"
    );
    // The kept-alive connection still serves the next request.
    healthz_ok(&client, &served).await;
    served.stop().await;
}

#[tokio::test]
async fn a_client_that_reads_none_of_its_answers_is_cut_after_the_idle_timeout() {
    let (served, _) = serve(1000, RecordingAgent::default()).await;
    let addr: std::net::SocketAddr = served.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .set_recv_buffer_size(4096)
        .expect("a small receive buffer");
    let mut tcp = socket.connect(addr).await.expect("connect");
    // Many large answers asked for at once, far more than the socket buffers hold.
    let requests = "GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n".repeat(40);
    tcp.write_all(requests.as_bytes())
        .await
        .expect("send the requests");
    // The client reads nothing for longer than the idle timeout: that is its misbehaviour.
    tokio::time::sleep(IDLE * 2).await;
    let (answers, _) = until_closed(tcp).await;
    let one = turnstile::http::openapi_json().len();
    assert!(
        answers.len() < 40 * one,
        "the server wrote all {} bytes to a client that read nothing",
        answers.len()
    );
    healthz_ok(&fresh_connections(), &served).await;
    served.stop().await;
}
