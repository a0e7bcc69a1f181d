//! A `serve` process told to stop (`SIGTERM`) with 600 live sessions on the file store, no turn
//! running and no connection open keeps answering until it exits, through the drain and the file store's close
//! after it: a client polling `/readyz` on a new connection each time gets `503 draining`, never
//! a refused connection. The same with `--cluster` on Redis: the process
//! keeps its listener open until it exits: a client that polls meanwhile, on a new
//! connection each time, gets `503 draining` with `Retry-After` from `/readyz` (and would for a
//! turn) — never a refused connection — while the sessions stop and give their leases back,
//! and afterwards while a slow client's request still holds its connection open (the process
//! waits for it up to its connection grace). A load balancer then moves clients on by the
//! documented answer, not by connection errors.
//!
//! Redis holds writes for a while as the drain begins (`CLIENT PAUSE … WRITE`), so that giving
//! 200 leases back takes as long as it does over a busy network. (The poller asks `/readyz`,
//! which needs no store: a turn's lease lookup would wait behind the held writes on the
//! process's connection and only measure the pause.) A refused connection is
//! allowed only at the very end: within a few milliseconds of the process's exit, which the
//! test watches for.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use support::cluster::{turn, Cluster, ClusterOptions};
use support::http::ALICE;
use support::serve::{Serve, ServeStore};

const SESSIONS: usize = 200;

/// How long Redis holds writes (the leases' release) once the drain begins.
const WRITES_HELD: Duration = Duration::from_millis(1500);

/// How long before the exit (as seen by the test, which looks every 20 ms) a refused
/// connection may come: the process closes its sockets as it exits.
const EXIT_SLACK: Duration = Duration::from_millis(100);

/// One poll's outcome: when it was sent, and the status (or the connection error).
#[derive(Debug, Clone)]
struct Poll {
    sent: Instant,
    answer: Result<(u16, Option<String>, String), String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_process_answers_503_until_it_exits() {
    let mut cluster = Cluster::start(1, ClusterOptions::default()).await;
    let client = reqwest::Client::new();
    let user = format!("u{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    for s in 0..SESSIONS {
        let answer = turn(&client, &cluster.members[0], &user, &format!("s{s}"), "hi")
            .await
            .expect("an answer");
        assert_eq!(answer.status, 200, "{}", answer.body);
    }

    let mut redis = redis::Client::open(cluster.store_url.as_str())
        .expect("the store's URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the store's Redis");
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(WRITES_HELD.as_millis() as u64)
        .arg("WRITE")
        .query_async(&mut redis)
        .await
        .expect("CLIENT PAUSE");
    // A slow client: its request's body is still arriving when the drain begins.
    let mut slow =
        tokio::net::TcpStream::connect(cluster.members[0].base.trim_start_matches("http://"))
            .await
            .expect("connect");
    let head = format!(
        "POST /v1/sessions/{user}/slow/turns HTTP/1.1\r\nHost: x\r\nContent-Type: \
         application/json\r\nContent-Length: 100\r\n\r\n{{\"input\""
    );
    tokio::io::AsyncWriteExt::write_all(&mut slow, head.as_bytes())
        .await
        .expect("send the head");
    let signalled = Instant::now();
    cluster.members[0].signal("TERM");

    let poller = Poller::start(cluster.members[0].base.clone());
    assert!(
        cluster.members[0].wait_exit(Duration::from_secs(30)).await,
        "the drained process exits 0"
    );
    let exited = Instant::now();
    drop(slow);
    let polls = poller.stop().await;
    answered_until_exit(&polls, signalled, exited, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_connection_open_a_draining_process_answers_503_until_it_exits() {
    // The file store: after the drain its journal is written behind into the sessions' files
    // as it closes, which takes a while with many sessions (0.2 s for 200 in a debug build:
    // three times as many keep the window wide on a busy machine).
    let mut serve = Serve::start(ServeStore::File, 0, 1, &[]);
    let client = reqwest::Client::new();
    for s in 0..3 * SESSIONS {
        let answer = client
            .post(serve.url(&format!("/v1/sessions/alice/s{s}/turns")))
            .bearer_auth(ALICE)
            .json(&serde_json::json!({"input": "hi"}))
            .send()
            .await
            .expect("a turn");
        assert_eq!(answer.status(), 200);
    }
    // No connection of the test's stays open: the poller's are new each time.
    drop(client);
    let signalled = Instant::now();
    let poller = Poller::start(serve.base.clone());
    let status = tokio::task::spawn_blocking(move || {
        let status = serve.terminate(Duration::from_secs(30));
        (status, Instant::now())
    });
    let (status, exited) = status.await.expect("the process was waited for");
    assert!(status.success(), "the drained process exits 0: {status}");
    let polls = poller.stop().await;
    // The drain and the store's close take a fraction of a second here: a few polls.
    answered_until_exit(&polls, signalled, exited, 5);
}

/// A client polling `/readyz` on a new connection each time, until stopped.
struct Poller {
    polls: Arc<Mutex<Vec<Poll>>>,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Poller {
    fn start(base: String) -> Self {
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("a client");
        let polls = Arc::new(Mutex::new(Vec::<Poll>::new()));
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn({
            let (polls, stop) = (polls.clone(), stop.clone());
            async move {
                while !stop.is_cancelled() {
                    let sent = Instant::now();
                    let request = fresh.get(format!("{base}/readyz"));
                    let answer = match request.timeout(Duration::from_secs(5)).send().await {
                        Ok(response) => {
                            let status = response.status().as_u16();
                            let retry = response
                                .headers()
                                .get("retry-after")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned);
                            let body = response.text().await.unwrap_or_default();
                            Ok((status, retry, body))
                        }
                        Err(error) => Err(format!("{error:?}")),
                    };
                    polls.lock().push(Poll { sent, answer });
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
        Self { polls, stop, task }
    }

    /// Polls a little longer (refused by now), then stops and returns every poll.
    async fn stop(self) -> Vec<Poll> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.stop.cancel();
        self.task.await.expect("the poller ran");
        let polls = self.polls.lock().clone();
        polls
    }
}

/// Every poll from the drain's first `503` until `EXIT_SLACK` before the exit was answered
/// `503 draining` with `Retry-After`: none found the port closed; at least `min_polls` of them.
fn answered_until_exit(polls: &[Poll], signalled: Instant, exited: Instant, min_polls: usize) {
    // The drain begins when the process has handled the signal: polls from its first 503 on
    // (one sent before that may still find it ready).
    let began = polls
        .iter()
        .find(|p| matches!(&p.answer, Ok((503, _, _))))
        .map(|p| p.sent)
        .expect("the drain answered 503 at least once");
    assert!(
        began < signalled + Duration::from_secs(2),
        "the signal was handled"
    );
    let during: Vec<&Poll> = polls
        .iter()
        .filter(|p| p.sent >= began && p.sent + EXIT_SLACK < exited)
        .collect();
    assert!(
        during.len() >= min_polls,
        "the drain was polled {} times in {:?}",
        during.len(),
        exited - signalled
    );
    let refused: Vec<_> = during.iter().filter(|p| p.answer.is_err()).collect();
    assert!(
        refused.is_empty(),
        "{} of {} polls during the drain found no server (first {:?} after SIGTERM, the exit \
         {:?} after): {:?}",
        refused.len(),
        during.len(),
        refused[0].sent - signalled,
        exited - signalled,
        refused[0].answer
    );
    for poll in &during {
        let (status, retry, body) = poll.answer.as_ref().expect("answered");
        assert_eq!(*status, 503, "{body}");
        assert!(body.contains("draining"), "{body}");
        assert!(retry.is_some(), "503 draining says when to retry: {body}");
    }
    println!(
        "{} polls during a drain of {:?}, none refused",
        during.len(),
        exited - signalled
    );
}
