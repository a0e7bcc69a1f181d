//! Several gateways in one test process, each on its own loopback socket over its own runtime
//! with ownership, all sharing one memory store the way processes share a Redis: a cluster that
//! forwards over real HTTP without starting processes.

#![cfg(feature = "http")]
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use turnstile::channel::{ChannelRouter, MemoryPairingStore};
use turnstile::config::Ownership;
use turnstile::http::{Gateway, HttpConfig};
use turnstile::{Agent, InMemoryStore, Runtime, Store};

use super::http::tokens;

/// One gateway of the cluster.
pub struct Member {
    /// `http://127.0.0.1:PORT`, also its advertised address.
    pub base: String,
    pub gateway: Gateway,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Member {
    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn runtime(&self) -> &Runtime {
        self.gateway.runtime()
    }

    /// Drains it (giving its leases back) and waits for the server to end.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            super::harness::within(task)
                .await
                .expect("the server task ran");
        }
    }
}

/// `n` gateways sharing one store.
pub struct Gateways {
    pub store: Arc<dyn Store>,
    pub members: Vec<Member>,
}

impl Gateways {
    /// `n` forwarding gateways over `agent`, with the test tokens and `lease_ttl`.
    pub async fn start(n: usize, agent: Arc<dyn Agent>, lease_ttl: Duration) -> Self {
        let config = HttpConfig {
            forward: true,
            ..HttpConfig::default()
        };
        Self::start_with(n, agent, lease_ttl, config).await
    }

    /// Like [`Gateways::start`], with `config` for every gateway.
    pub async fn start_with(
        n: usize,
        agent: Arc<dyn Agent>,
        lease_ttl: Duration,
        config: HttpConfig,
    ) -> Self {
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        Self::start_over(store.clone(), vec![store; n], agent, lease_ttl, config).await
    }

    /// One gateway over each of `views` (wrappers of `store`, say, that lie or fail), with
    /// `store` kept for the test's checks.
    pub async fn start_over(
        store: Arc<dyn Store>,
        views: Vec<Arc<dyn Store>>,
        agent: Arc<dyn Agent>,
        lease_ttl: Duration,
        config: HttpConfig,
    ) -> Self {
        let mut members = Vec::new();
        for view in views {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a loopback port");
            let base = format!("http://{}", listener.local_addr().expect("bound address"));
            let runtime = Runtime::builder()
                .agent_arc(agent.clone())
                .store_arc(view)
                .with_ownership(Ownership::new(base.clone()).with_lease_ttl(lease_ttl))
                .build()
                .expect("runtime");
            let router = ChannelRouter::new(runtime, MemoryPairingStore::new());
            let gateway = Gateway::new(router)
                .with_tokens(tokens())
                .with_config(config.clone());
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let serving = gateway.clone().serve(listener, async move {
                let _ = rx.await;
            });
            let task = tokio::spawn(async move {
                serving.await.expect("the gateway serves and drains");
            });
            members.push(Member {
                base,
                gateway,
                shutdown: Some(tx),
                task: Some(task),
            });
        }
        Self { store, members }
    }

    /// Stops every member.
    pub async fn stop(mut self) {
        for member in &mut self.members {
            member.stop().await;
        }
    }
}
