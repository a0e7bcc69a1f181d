//! The HTTP gateway: the runtime behind an HTTP API with streaming, channel routing, bearer
//! tokens, Prometheus metrics and a graceful drain. Built on the crate's public API only, as an
//! embedding application would be. `docs/http-api.md` lists every endpoint.
//!
//! Build a [`Gateway`] from a [`ChannelRouter`] (which holds the runtime and the pairing store),
//! then either mount [`Gateway::router`] in your own server or call [`Gateway::serve`].

mod admin;
mod answer;
mod artifacts;
mod auth;
mod channels;
mod console;
mod deadline;
mod error;
mod events;
mod extract;
mod forward;
mod listen;
mod openapi;
mod ops;
mod sessions;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;

pub use auth::{Grant, Tokens, TokensError, MIN_TOKEN_BYTES};
pub use error::ApiError;
pub use forward::{FORWARDED_HEADER, OWNER_HEADER, SERVED_BY_HEADER};
pub use listen::default_max_connections;
pub use openapi::openapi_json;

use crate::channel::ChannelRouter;
use crate::runtime::{DrainReport, Runtime};

/// Default largest request body: twice the default input limit
/// ([`crate::config::MAX_MESSAGE_BYTES`]), since JSON escaping can double a text's size. Larger bodies
/// are answered 413 before they are read whole.
pub const DEFAULT_BODY_LIMIT: usize = 2 * crate::config::MAX_MESSAGE_BYTES;

/// Default time a request waits for its answer. A minute covers a long LLM reply; a caller
/// that wants more streams (`Accept: text/event-stream`) or polls the session.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Default time running and queued turns get to finish once shutdown began, before they are
/// interrupted (and persisted as such). Under the 30 s that orchestrators such as Kubernetes
/// wait after SIGTERM by default, with room for the final writes.
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(25);

/// Default time connections get to finish writing their last responses after the drain, before
/// the server stops regardless: a slow reader must not hold a shutdown forever.
pub const DEFAULT_CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// Default time a connection may wait for the first byte of a request (a new connection, or a
/// kept-alive one after its last response) before it is closed. Longer than the 60 s idle
/// timeout of common load balancers and proxies, so that they close an idle connection first
/// and never send a request on one this side is closing.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// Default time a request's header block may take from its first byte to its end. A header
/// block is a few kilobytes, sent in one go by any real client even over a slow link; a client
/// that sends it byte by byte (to hold the connection) is cut off after this long.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default time forwarding waits to connect to a session's owner. A peer on the same network
/// connects in well under a millisecond; two seconds cover one lost SYN (resent after one
/// second) without holding a request long on an owner that is gone.
pub const DEFAULT_FORWARD_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The gateway's limits, and whether it forwards requests to the process that owns their
/// session.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest request body, in bytes (413 past it).
    pub body_limit: usize,
    /// How long a request waits for its answer (504 past it). A turn goes on after it unless
    /// the request set `cancel_on_timeout`.
    pub request_timeout: Duration,
    /// How long [`Gateway::serve`] lets turns finish after the shutdown signal.
    pub drain_deadline: Duration,
    /// How long [`Gateway::serve`] waits for open connections after the drain.
    pub connection_grace: Duration,
    /// Whether a request for a session that another live process owns is forwarded there (one
    /// hop; `docs/cluster.md`). Needs a runtime built with
    /// [`RuntimeBuilder::with_ownership`](crate::RuntimeBuilder::with_ownership), whose
    /// address is this process's advertised one. Off: such a request is answered 421
    /// `owned_elsewhere`, naming the owner.
    pub forward: bool,
    /// How long forwarding waits to connect to the owner (503 `owner_unreachable` past it).
    pub forward_connect_timeout: Duration,
    /// How long [`Gateway::serve`] keeps a connection that waits for a request's first byte.
    pub idle_timeout: Duration,
    /// How long [`Gateway::serve`] lets a request's header block take from its first byte.
    pub header_timeout: Duration,
    /// How many connections [`Gateway::serve`] holds open at once; at the cap it stops
    /// accepting until one closes (new ones wait in the kernel's queue).
    pub max_connections: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: DEFAULT_BODY_LIMIT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            drain_deadline: DEFAULT_DRAIN_DEADLINE,
            connection_grace: DEFAULT_CONNECTION_GRACE,
            forward: false,
            forward_connect_timeout: DEFAULT_FORWARD_CONNECT_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: default_max_connections(),
        }
    }
}

/// Why [`Gateway::serve`] did not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// No tokens are configured and the listener is not on a loopback address.
    #[error(
        "no bearer tokens are configured, so the API would be open to anyone who can reach \
         {addr}; refusing to serve on a non-loopback address. Give a tokens file (--tokens FILE \
         or TURNSTILE_TOKENS) or listen on 127.0.0.1"
    )]
    OpenOnNonLoopback {
        /// The address the listener is bound to.
        addr: SocketAddr,
    },
    /// Forwarding is on, but the runtime shares no sessions with other processes.
    #[error(
        "forwarding is on but the runtime was built without ownership, so no session is ever \
         owned elsewhere; build it with RuntimeBuilder::with_ownership(Ownership::new(ADDRESS)) \
         or turn HttpConfig::forward off"
    )]
    ForwardingWithoutOwnership,
    /// The listener failed.
    #[error("the HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The HTTP API over a runtime. Cheap to clone: it is the state every handler receives.
#[derive(Clone)]
pub struct Gateway {
    channels: ChannelRouter,
    tokens: Arc<Tokens>,
    metrics: Option<PrometheusHandle>,
    config: Arc<HttpConfig>,
    /// The client forwarded requests go through, built on first use with `config`'s settings.
    forwarder: Arc<OnceLock<Result<forward::Forwarder, String>>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("channels", &self.channels)
            .field("metrics", &self.metrics.is_some())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over the router's runtime and pairing store, with no tokens (everything is
    /// allowed; [`Gateway::serve`] then listens on loopback only), no metrics and default limits.
    pub fn new(channels: ChannelRouter) -> Self {
        Self {
            channels,
            tokens: Arc::new(Tokens::none()),
            metrics: None,
            config: Arc::new(HttpConfig::default()),
            forwarder: Arc::default(),
        }
    }

    /// Requires one of these bearer tokens on every route but the probes.
    pub fn with_tokens(mut self, tokens: Tokens) -> Self {
        self.tokens = Arc::new(tokens);
        self
    }

    /// Serves `/metrics` from this Prometheus recorder's handle.
    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Replaces the limits.
    pub fn with_config(mut self, config: HttpConfig) -> Self {
        self.config = Arc::new(config);
        self.forwarder = Arc::default();
        self
    }

    /// The runtime turns go to.
    pub fn runtime(&self) -> &Runtime {
        self.channels.runtime()
    }

    /// The channel router (and through it, the pairing store).
    pub fn channels(&self) -> &ChannelRouter {
        &self.channels
    }

    /// The limits.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    pub(crate) fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.metrics.as_ref()
    }

    pub(crate) fn forwarder(&self) -> Result<&forward::Forwarder, ApiError> {
        self.forwarder
            .get_or_init(|| forward::Forwarder::new(&self.config).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| ApiError::Internal(e.clone()))
    }

    /// Every route, with auth, limits and metrics. With no tokens configured this router allows
    /// every request: mount it on a loopback listener only (as [`Gateway::serve`] does).
    pub fn router(&self) -> Router {
        let session = "/v1/sessions/{user}/{session}";
        // Turns time themselves (a timeout must not cut an event stream); the rest share one.
        let mut turns = Router::new().route(&format!("{session}/turns"), post(sessions::post_turn));
        let mut messages = Router::new().route(
            "/v1/channels/{channel}/messages",
            post(channels::post_message),
        );
        let mut one_session = Router::new()
            .route(&format!("{session}/interrupt"), post(sessions::interrupt))
            .route(&format!("{session}/clear"), post(sessions::clear))
            .route(&format!("{session}/fork"), post(sessions::fork))
            .route(
                session,
                get(sessions::get_session).delete(sessions::delete_session),
            );
        if self.config.forward {
            let by_path =
                axum::middleware::from_fn_with_state(self.clone(), forward::session_route);
            turns = turns.route_layer(by_path.clone());
            one_session = one_session.route_layer(by_path);
            messages = messages.route_layer(axum::middleware::from_fn_with_state(
                self.clone(),
                forward::channel_route,
            ));
        }
        let quick = one_session
            // Artifacts: read and written in the artifact store by any process.
            .merge(artifacts::routes())
            // Read from the store: any process answers it, no forwarding needed.
            .route(&format!("{session}/events"), get(events::list_events))
            .route("/v1/users/{user}/sessions", get(sessions::list_sessions))
            .route(
                "/v1/users/{user}",
                axum::routing::delete(sessions::delete_user),
            )
            .route(
                "/v1/pairings/{channel}/{channel_user}",
                put(channels::put_pairing)
                    .get(channels::get_pairing)
                    .delete(channels::delete_pairing),
            )
            .route("/healthz", get(ops::healthz))
            .route("/readyz", get(ops::readyz))
            .route("/metrics", get(ops::metrics))
            .route("/openapi.json", get(openapi::openapi_json_route))
            .route_layer(axum::middleware::from_fn_with_state(
                self.clone(),
                ops::timeout,
            ));
        turns
            .merge(messages)
            .merge(quick)
            // Operator routes (`docs/http-api.md`, "Operators") and the pages (`docs/console.md`).
            .merge(admin::routes(self))
            .merge(console::routes())
            .fallback(ops::not_found)
            .method_not_allowed_fallback(ops::method_not_allowed)
            .layer(axum::middleware::from_fn(ops::record))
            .layer(DefaultBodyLimit::max(self.config.body_limit))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                deadline::body_deadline,
            ))
            .layer(CatchPanicLayer::custom(ops::panicked))
            .with_state(self.clone())
    }

    /// Serves the API on `listener` until `shutdown` completes, then drains: `/readyz` answers
    /// 503 and new turns 503 `draining` while running and queued turns finish (up to
    /// [`HttpConfig::drain_deadline`], then they are interrupted and persisted as such), every
    /// session is flushed, and open connections get [`HttpConfig::connection_grace`] to finish.
    ///
    /// Connections are bounded: at most [`HttpConfig::max_connections`] are open at once, one
    /// that waits longer than [`HttpConfig::idle_timeout`] for a request or takes longer than
    /// [`HttpConfig::header_timeout`] over a header block is closed, and a request body must
    /// arrive within [`HttpConfig::request_timeout`] (408 `body_timeout` otherwise).
    ///
    /// Refuses ([`ServeError::OpenOnNonLoopback`]) to serve without tokens on an address other
    /// than loopback, and ([`ServeError::ForwardingWithoutOwnership`]) to forward over a runtime
    /// that shares no sessions.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<DrainReport, ServeError> {
        let addr = listener.local_addr()?;
        if self.tokens.is_empty() && !addr.ip().is_loopback() {
            return Err(ServeError::OpenOnNonLoopback { addr });
        }
        if self.config.forward && self.runtime().address().is_none() {
            return Err(ServeError::ForwardingWithoutOwnership);
        }
        tracing::info!(%addr, tokens = self.tokens.len(), "serving");
        let runtime = self.runtime().clone();
        let deadline = self.config.drain_deadline;
        let drained = CancellationToken::new();
        let report = Arc::new(parking_lot::Mutex::new(None));
        // The server keeps accepting while the runtime drains, so that probes see 503 and
        // running turns deliver their answers; it stops accepting once the drain is done.
        let signal = {
            let (drained, report) = (drained.clone(), report.clone());
            async move {
                shutdown.await;
                tracing::info!(?deadline, "shutdown requested: draining");
                let done = runtime.drain(deadline).await;
                tracing::info!(clean = done.clean, left = done.left, "drained");
                *report.lock() = Some(done);
                drained.cancel();
            }
        };
        let limits = listen::ConnectionLimits {
            read: listen::ReadLimits {
                idle: self.config.idle_timeout,
                head: self.config.header_timeout,
            },
            max_connections: self.config.max_connections.max(1),
        };
        let force = CancellationToken::new();
        let server = listen::serve(
            listener,
            self.router(),
            limits,
            drained.clone(),
            force.clone(),
        );
        let grace = self.config.connection_grace;
        tokio::select! {
            _ = futures::future::join(server, signal) => {}
            () = async { drained.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "connections still open after the grace period; closing");
                force.cancel();
            }
        }
        let done = report.lock().take();
        // The server only ends through the signal, which always leaves a report; if axum ever
        // ended on its own, drain now so that nothing is left unflushed.
        match done {
            Some(done) => Ok(done),
            None => Ok(self.runtime().drain(deadline).await),
        }
    }
}
