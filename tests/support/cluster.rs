//! Real processes: a private `redis-server` and N `turnstile serve --cluster` children on it,
//! each on its own loopback port. Children are killed when the cluster is dropped.
//!
//! A test that needs them never skips: [`Cluster::start`] fails the test, saying how to install
//! it, when `redis-server` is not installed.

#![cfg(all(feature = "http", feature = "redis"))]
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::cli::TURNSTILE;
use super::harness::eventually_ok_within;
use super::redis_cluster::{ClusterLayout, RedisCluster};
use super::redis_server::RedisServer;

/// How long a child may take to print its address and answer `/healthz`.
const STARTUP: Duration = Duration::from_secs(20);

/// How the children are started.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `--lease-ttl`, in seconds.
    pub lease_ttl: f64,
    /// `--latency` of the mock agent, in milliseconds.
    pub latency_ms: u64,
    /// `--chunks` of the mock agent.
    pub chunks: usize,
    /// `--request-timeout`, in seconds.
    pub request_timeout: f64,
    /// Query parameters added to the store URL (`replicas=1&…`), if any.
    pub store_query: String,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            lease_ttl: 2.0,
            latency_ms: 5,
            chunks: 2,
            request_timeout: 10.0,
            store_query: String::new(),
        }
    }
}

/// One `turnstile serve --cluster` child.
pub struct Member {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`, also its advertised address.
    pub base: String,
}

impl Member {
    /// A handle on the process at `base` that owns no child (for requests only).
    pub fn at(base: &str) -> Member {
        Member {
            child: None,
            base: base.to_owned(),
        }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`, `TERM`) to the child.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// Kills the child at once (`SIGKILL`) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits for the child to exit and tells whether it exited with success; fails the test
    /// when it is still running after `within` (or was never started here).
    pub async fn wait_exit(&mut self, within: Duration) -> bool {
        let base = self.base.clone();
        let child = self.child.as_mut().expect("a child started here");
        let status = eventually_ok_within(
            &format!("{base} to exit"),
            within,
            Duration::from_millis(20),
            || {
                let exited = child.try_wait().expect("poll the child").ok_or("running");
                std::future::ready(exited)
            },
        )
        .await;
        self.child = None;
        status.success()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // SIGKILL ends a stopped child too.
        self.kill();
    }
}

/// A Redis and the children serving from it.
pub struct Cluster {
    pub members: Vec<Member>,
    /// The `--store` every child was given.
    pub store_url: String,
    options: ClusterOptions,
    // Declared last: dropped after the children.
    _redis: Backing,
}

/// What the children store their sessions in: one Redis server, or a Redis Cluster.
enum Backing {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl Cluster {
    /// A private Redis (or the one `REDIS_URL` names) and `n` children on it, each answering
    /// `/healthz`.
    pub async fn start(n: usize, options: ClusterOptions) -> Cluster {
        let redis = RedisServer::start();
        let store_url = redis.url().to_owned();
        Self::with_children(n, options, store_url, Backing::Server(redis)).await
    }

    /// A private Redis and one child on each of `ports`, in order.
    pub async fn start_on_ports(ports: &[u16], options: ClusterOptions) -> Cluster {
        let redis = RedisServer::start();
        let store_url = redis.url().to_owned();
        let mut cluster = Self::with_children(0, options, store_url, Backing::Server(redis)).await;
        for &port in ports {
            let member = cluster.spawn_on(port).await;
            cluster.members.push(member);
        }
        cluster
    }

    /// A private Redis Cluster of three masters and `n` children on it.
    pub async fn start_on_redis_cluster(n: usize, options: ClusterOptions) -> Cluster {
        Self::start_on_redis_cluster_with(n, options, ClusterLayout::default()).await
    }

    /// A private Redis Cluster laid out as `layout` says (six nodes with replicas, say) and `n`
    /// children on it.
    pub async fn start_on_redis_cluster_with(
        n: usize,
        options: ClusterOptions,
        layout: ClusterLayout,
    ) -> Cluster {
        let redis = RedisCluster::start_with(layout);
        let mut store_url = redis.url();
        if !options.store_query.is_empty() {
            store_url = format!("{store_url}/?{}", options.store_query);
        }
        Self::with_children(n, options, store_url, Backing::Cluster(redis)).await
    }

    /// The Redis Cluster the children store in, when they do.
    pub fn redis_cluster(&mut self) -> Option<&mut RedisCluster> {
        match &mut self._redis {
            Backing::Cluster(cluster) => Some(cluster),
            Backing::Server(_) => None,
        }
    }

    async fn with_children(
        n: usize,
        options: ClusterOptions,
        store_url: String,
        backing: Backing,
    ) -> Cluster {
        let mut cluster = Cluster {
            members: Vec::new(),
            store_url,
            options,
            _redis: backing,
        };
        for _ in 0..n {
            let member = cluster.spawn().await;
            cluster.members.push(member);
        }
        cluster
    }

    /// Starts one more child (not added to `members`).
    pub async fn spawn(&self) -> Member {
        self.spawn_on(0).await
    }

    /// Starts one more child listening on `port` (0: any free one), not added to `members`.
    pub async fn spawn_on(&self, port: u16) -> Member {
        let o = &self.options;
        let addr = format!("127.0.0.1:{port}");
        let mut child = Command::new(TURNSTILE)
            .args(["serve", "--cluster", "--addr", &addr, "--agent", "mock"])
            .args(["--store", &self.store_url])
            .args(["--lease-ttl", &o.lease_ttl.to_string()])
            .args(["--latency", &o.latency_ms.to_string()])
            .args(["--chunks", &o.chunks.to_string()])
            .args(["--request-timeout", &o.request_timeout.to_string()])
            .args(["--drain-timeout", "5"])
            // Quiet unless asked (`TURNSTILE_TEST_CHILD_LOG=warn` to watch a failing run).
            .env(
                "RUST_LOG",
                std::env::var("TURNSTILE_TEST_CHILD_LOG").unwrap_or_else(|_| "error".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start turnstile serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut member = Member {
            child: Some(child),
            base: String::new(),
        };
        member.base = listening_address(stdout);
        wait_healthy(&member).await;
        member
    }
}

/// Reads the child's `listening on URL` line (and keeps draining its stdout afterwards, so that
/// it never blocks on a full pipe).
fn listening_address(stdout: std::process::ChildStdout) -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("turnstile serve: listening on ") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(url.to_owned());
                }
            }
        }
    });
    rx.recv_timeout(STARTUP)
        .expect("turnstile serve printed its address")
}

async fn wait_healthy(member: &Member) {
    let client = reqwest::Client::new();
    let what = format!("{} to answer /healthz", member.base);
    eventually_ok_within(&what, STARTUP, Duration::from_millis(20), || async {
        let probe = client
            .get(member.url("/healthz"))
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        match probe {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(r.status().to_string()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
}

/// What a process answered about one session, asked with `x-turnstile-forwarded` so that it
/// answers for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub status: u16,
    pub live: bool,
    pub pending: u64,
    pub owner: Option<String>,
    pub owner_epoch: Option<u64>,
}

/// `GET /v1/sessions/{user}/{session}` at `member` alone (never forwarded).
pub async fn view(client: &reqwest::Client, member: &Member, user: &str, session: &str) -> View {
    let response = client
        .get(member.url(&format!("/v1/sessions/{user}/{session}")))
        .header(turnstile::http::FORWARDED_HEADER, "1")
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("the process answers a read");
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    View {
        status,
        live: body["live"] == true,
        pending: body["pending"].as_u64().unwrap_or(0),
        owner: body["owner"].as_str().map(str::to_owned),
        owner_epoch: body["owner_epoch"].as_u64(),
    }
}

/// The answer to one turn.
#[derive(Debug, Clone)]
pub struct TurnAnswer {
    pub status: u16,
    /// `x-turnstile-served-by`.
    pub served_by: String,
    pub body: serde_json::Value,
}

/// `POST /v1/sessions/{user}/{session}/turns` at `member`; `Err` when no HTTP answer came (the
/// connection failed).
pub async fn turn(
    client: &reqwest::Client,
    member: &Member,
    user: &str,
    session: &str,
    input: &str,
) -> reqwest::Result<TurnAnswer> {
    let response = client
        .post(member.url(&format!("/v1/sessions/{user}/{session}/turns")))
        .json(&serde_json::json!({ "input": input }))
        .send()
        .await?;
    let status = response.status().as_u16();
    let served_by = response
        .headers()
        .get(turnstile::http::SERVED_BY_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.json().await.unwrap_or_default();
    Ok(TurnAnswer {
        status,
        served_by,
        body,
    })
}

impl Cluster {
    /// The store the children share, opened here to check what they stored.
    pub async fn store(&self) -> std::sync::Arc<dyn turnstile::Store> {
        let url = turnstile::backend::StoreUrl::parse(&self.store_url).expect("a store URL");
        turnstile::backend::open_store(&url)
            .await
            .expect("open the shared store")
            .store()
            .clone()
    }
}

/// A random index below `n` (no generator crate needed for spreading requests).
pub fn random_below(n: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % n as u128) as usize
}
