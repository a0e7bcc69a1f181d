//! The deployment users copy, for real: three `serve --cluster` processes behind HAProxy
//! (Debian's `haproxy`) configured by `examples/deploy/haproxy.cfg` itself, and clients that
//! send every turn through HAProxy with an `Idempotency-Key`, once. The processes are restarted
//! one after the other under that load (`SIGTERM`, exit, start again on the same port), as a
//! rolling deployment does. Clients see no error at all — every turn is answered 200 on its
//! first send — and afterwards every session holds exactly the turns acknowledged, once each,
//! in order.
//!
//! The test fails, saying how to install it, when `haproxy` is missing; `scripts/test.sh` installs it.
#![cfg(all(feature = "http", feature = "redis"))]

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use support::cluster::{Cluster, ClusterOptions};
use support::harness::eventually_ok_within;
use support::redis_server::free_port;
use turnstile::state::EventKind;
use turnstile::SessionKey;

const CLIENTS: usize = 12;

/// The ports `examples/deploy/haproxy.cfg` names, replaced by free ones here.
const EXAMPLE_FRONTEND: &str = "127.0.0.1:8080";
const EXAMPLE_SERVERS: [&str; 3] = ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"];
/// The example's names for those servers, in the same order.
const SERVERS: [&str; 3] = ["a", "b", "c"];

/// HAProxy running the example's configuration; killed on drop.
struct Haproxy {
    child: Child,
    base: String,
    /// HAProxy's stats socket, added to the example's `global` section so that the test can ask
    /// which servers HAProxy sends requests to.
    stats: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Haproxy {
    /// What HAProxy says of `server` of the example's backend, from `show stat` on its stats
    /// socket: the status its health checks give (`UP`, `DOWN`, `DOWN 1/2` while rising, ...)
    /// and how many requests it has sent the server so far.
    async fn stat_of(&self, server: &str) -> Result<(String, u64), String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let ask = async {
            let mut socket = tokio::net::UnixStream::connect(&self.stats)
                .await
                .map_err(|e| format!("the stats socket: {e}"))?;
            socket
                .write_all(b"show stat\n")
                .await
                .map_err(|e| format!("asking for stats: {e}"))?;
            let mut answer = String::new();
            socket
                .read_to_string(&mut answer)
                .await
                .map_err(|e| format!("reading stats: {e}"))?;
            Ok::<_, String>(answer)
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), ask)
            .await
            .map_err(|_| "the stats socket did not answer within 5 s".to_owned())??;
        // CSV: proxy name, server name, ..., `stot` (requests sent) is the 8th field and the
        // status the 18th.
        let fields = answer
            .lines()
            .map(|line| line.split(',').collect::<Vec<_>>())
            .find(|fields| fields.len() > 17 && fields[0] == "processes" && fields[1] == server)
            .ok_or_else(|| format!("no row for server {server} in: {answer}"))?;
        let sent = fields[7]
            .parse()
            .map_err(|e| format!("stot {:?}: {e}", fields[7]))?;
        Ok((fields[17].to_owned(), sent))
    }

    /// Waits until HAProxy has `server` up and has sent it `more` requests past the `sent` it
    /// had when the process behind it had restarted: only then is the new process in the
    /// rotation (a status read alone may still be the one from before the restart).
    async fn wait_until_serving(&self, server: &str, sent: u64, more: u64) {
        eventually_ok_within(
            &format!("haproxy to send {more} requests to the restarted server {server}"),
            Duration::from_secs(20),
            Duration::from_millis(50),
            || async {
                match self.stat_of(server).await? {
                    (status, now) if status == "UP" && now >= sent + more => Ok(()),
                    (status, now) => Err(format!(
                        "status {status}, {} sent since",
                        now.saturating_sub(sent)
                    )),
                }
            },
        )
        .await;
    }
}

/// Waits until the clients have had `more` turns acknowledged past `from`: the load is flowing.
async fn wait_for_turns(acknowledged: &AtomicUsize, from: usize, more: usize) {
    eventually_ok_within(
        &format!("{more} more acknowledged turns"),
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async {
            match acknowledged.load(Ordering::Relaxed) - from {
                done if done >= more => Ok(()),
                done => Err(format!("{done} so far")),
            }
        },
    )
    .await;
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_haproxy(frontend: u16, servers: &[u16]) -> Haproxy {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/deploy/haproxy.cfg"
    ))
    .expect("the example configuration");
    let mut config = example.replace(EXAMPLE_FRONTEND, &format!("127.0.0.1:{frontend}"));
    for (example, port) in EXAMPLE_SERVERS.iter().zip(servers) {
        assert!(config.contains(example), "the example names {example}");
        config = config.replace(example, &format!("127.0.0.1:{port}"));
    }
    // The test reads HAProxy's own log only when it fails.
    config = config.replace(
        "log stdout format raw local0 info",
        "log stderr format raw local0 warning",
    );
    let dir = tempfile::tempdir().expect("a temporary folder");
    let stats = dir.path().join("stats.sock");
    assert!(
        config.contains("global\n"),
        "the example has a global section"
    );
    config = config.replacen(
        "global\n",
        &format!("global\n    stats socket {}\n", stats.display()),
        1,
    );
    let path = dir.path().join("haproxy.cfg");
    std::fs::write(&path, config).expect("write the configuration");
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => panic!(
                "haproxy is not installed: the deployment test runs the real one; install it \
                 with `apt-get install haproxy` (scripts/test.sh does this when it is missing)"
            ),
            _ => panic!("could not start haproxy: {e}"),
        });
    let haproxy = Haproxy {
        child,
        base: format!("http://127.0.0.1:{frontend}"),
        stats,
        _dir: dir,
    };
    let client = reqwest::Client::new();
    eventually_ok_within(
        "haproxy to answer /readyz through a ready process",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async {
            match client.get(format!("{}/readyz", haproxy.base)).send().await {
                Ok(r) if r.status() == 200 => Ok(()),
                Ok(r) => Err(r.status().to_string()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    haproxy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_haproxy_shows_clients_no_error_and_loses_nothing() {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let options = ClusterOptions {
        lease_ttl: 5.0,
        latency_ms: 10,
        chunks: 1,
        request_timeout: 10.0,
        ..ClusterOptions::default()
    };
    let mut cluster = Cluster::start_on_ports(&ports, options).await;
    let haproxy = start_haproxy(free_port(), &ports).await;

    let client = reqwest::Client::new();
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (client, stop, errors, acknowledged, base) = (
            client.clone(),
            stop.clone(),
            errors.clone(),
            acknowledged.clone(),
            haproxy.base.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut acked: Vec<(String, u64)> = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let input = format!("c{c}-t{i}");
                // Sent once; an error is what a client would see. It is sent again only so
                // that the check afterwards knows the turn's one outcome.
                let mut first = true;
                let seq = loop {
                    let sent = client
                        .post(format!("{base}/v1/sessions/roll/s{c}/turns"))
                        .header("idempotency-key", &input)
                        .json(&serde_json::json!({ "input": input }))
                        .timeout(Duration::from_secs(30))
                        .send()
                        .await;
                    let error = match sent {
                        Ok(r) if r.status() == 200 => {
                            let body: Value = r.json().await.expect("a JSON outcome");
                            break body["seq"].as_u64().expect("a seq");
                        }
                        Ok(r) => {
                            let status = r.status();
                            format!("{status} {}", r.text().await.unwrap_or_default())
                        }
                        Err(e) => format!("no answer: {e}"),
                    };
                    if first {
                        errors.lock().push(format!("{input}: {error}"));
                        first = false;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                };
                acknowledged.fetch_add(1, Ordering::Relaxed);
                acked.push((input, seq));
                i += 1;
            }
            (format!("s{c}"), acked)
        }));
    }

    wait_for_turns(&acknowledged, 0, 100).await;
    for (i, &port) in ports.iter().enumerate() {
        let before = acknowledged.load(Ordering::Relaxed);
        cluster.members[i].signal("TERM");
        assert!(
            cluster.members[i].wait_exit(Duration::from_secs(30)).await,
            "process {i} drained and exited 0"
        );
        cluster.members[i] = cluster.spawn_on(port).await;
        // Once HAProxy sends the restarted process requests, the next one goes.
        let (_, sent) = haproxy.stat_of(SERVERS[i]).await.expect("haproxy's stats");
        haproxy.wait_until_serving(SERVERS[i], sent, 10).await;
        println!(
            "process {i} restarted; {} turns acknowledged meanwhile",
            acknowledged.load(Ordering::Relaxed) - before
        );
    }
    wait_for_turns(&acknowledged, acknowledged.load(Ordering::Relaxed), 100).await;
    stop.store(true, Ordering::Relaxed);
    let mut sessions = Vec::new();
    for task in tasks {
        sessions.push(task.await.expect("a client"));
    }

    let errors = errors.lock().clone();
    let total = acknowledged.load(Ordering::Relaxed);
    println!(
        "{total} turns through a rolling restart, {} client-visible errors",
        errors.len()
    );
    assert!(
        errors.is_empty(),
        "{} of {total} turns reached their client as an error: {:?}",
        errors.len(),
        &errors[..errors.len().min(10)]
    );
    let store = cluster.store().await;
    for (session, acked) in &sessions {
        let key = SessionKey::new("roll", session.as_str()).expect("key");
        let events = turnstile::store::read_log(store.as_ref(), &key, u64::MAX, 1_000)
            .await
            .expect("read the log");
        let stored: Vec<(u64, String)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::UserInput { text, .. } => Some((e.seq, text.clone())),
                _ => None,
            })
            .collect();
        let texts: Vec<&str> = stored.iter().map(|(_, t)| t.as_str()).collect();
        let wanted: Vec<&str> = acked.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            texts, wanted,
            "{session}: exactly the acknowledged turns, once, in order"
        );
        for ((input, seq), (input_seq, _)) in acked.iter().zip(&stored) {
            assert_eq!(*seq, input_seq + 1, "{session}: {input}'s outcome");
        }
    }
}
