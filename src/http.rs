//! The HTTP gateway: the runtime behind an HTTP API with streaming, channel routing, bearer
//! tokens, Prometheus metrics and a graceful drain. Built on the crate's public API only, as an
//! embedding application would be. `docs/http-api.md` lists every endpoint.
//!
//! Build a [`Gateway`] from a [`ChannelRouter`] (which holds the runtime and the pairing store),
//! then either mount [`Gateway::router`] in your own server or call [`Gateway::serve`].

// The router and the OpenAPI document are the only users of the route handlers; the handlers
// share the bottom modules (`docs/architecture.md`, "The HTTP gateway's rooms").
mod admin;
mod artifacts;
mod channel_hooks;
mod channels;
mod console;
mod events;
mod openai;
mod ops;
mod sent_requests;
mod sessions;
mod state;

mod openapi;

mod answer;
mod auth;
mod config;
mod deadline;
mod error;
mod extract;
mod forward;
mod gateway;
mod headers;
mod listen;
mod middleware;
mod schema;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;

pub use crate::agent::INSTRUCTIONS_ATTRIBUTE;
pub use auth::{Grant, Tokens, TokensError, MIN_TOKEN_BYTES};
pub use config::{
    HttpConfig, DEFAULT_BODY_LIMIT, DEFAULT_CONNECTION_GRACE, DEFAULT_DRAIN_DEADLINE,
    DEFAULT_FORWARD_CONNECT_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use error::ApiError;
pub use gateway::{Gateway, DEFAULT_MODEL};
pub use headers::{FORWARDED_HEADER, OWNER_HEADER, SERVED_BY_HEADER};
pub use listen::{default_max_connections, Lingering};
pub use openai::{
    DEFAULT_USER, MAX_CONVERSATION_ID_BYTES, MAX_ITEMS, MAX_LIST_LIMIT, MAX_METADATA_KEY_BYTES,
    MAX_METADATA_PAIRS, MAX_METADATA_VALUE_BYTES, SESSION_HEADER, USER_HEADER,
};
pub use openapi::openapi_json;
pub use state::{MAX_STATE_EDIT_KEYS, MAX_STATE_KEY_BYTES};

use crate::{DrainReport, Error};

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

impl Gateway {
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
            .route(&format!("{session}/state"), post(state::edit_state))
            .route(
                session,
                get(sessions::get_session).delete(sessions::delete_session),
            );
        if self.config().forward {
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
            .route(&format!("{session}/turns/{{seq}}"), get(events::get_turn))
            // Kept in this process's memory, read here (`docs/http-api.md`).
            .route(
                &format!("{session}/turns/{{seq}}/model-requests"),
                get(sent_requests::get_sent_requests),
            )
            .route("/v1/users/{user}/sessions", get(sessions::list_sessions))
            .route("/v1/state-keys", get(state::list_state_keys))
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
                middleware::timeout,
            ));
        // OpenAI's API on the same sessions (`docs/openai-api.md`).
        let (openai_turns, openai_quick) = openai::routes(self);
        let openai_quick = openai_quick.route_layer(axum::middleware::from_fn_with_state(
            self.clone(),
            middleware::timeout,
        ));
        turns
            .merge(messages)
            .merge(quick)
            .merge(openai_turns)
            .merge(openai_quick)
            // Operator routes (`docs/http-api.md`, "Operators") and the pages (`docs/console.md`).
            .merge(admin::routes(self))
            .merge(console::routes())
            // The platforms' requests to the channel adapters (`docs/channels.md`).
            .merge(
                channel_hooks::routes().route_layer(axum::middleware::from_fn_with_state(
                    self.clone(),
                    middleware::timeout,
                )),
            )
            .fallback(middleware::not_found)
            .method_not_allowed_fallback(middleware::method_not_allowed)
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                middleware::same_origin,
            ))
            .layer(axum::middleware::from_fn(middleware::record))
            .layer(DefaultBodyLimit::max(self.config().body_limit))
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                deadline::body_deadline,
            ))
            .layer(CatchPanicLayer::custom(middleware::panicked))
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
        let (report, lingering) = self.serve_lingering(listener, shutdown).await?;
        lingering.close().await;
        Ok(report)
    }

    /// [`Gateway::serve`] for a process with more to do after the drain (close its store, stop
    /// its tool servers): the listener is handed back still open in a [`Lingering`], which
    /// answers every connection `503 draining` (with `Retry-After`) until it is closed, so that
    /// clients and load balancers hear that answer, not a refused connection, until the process
    /// is gone. It holds no part of the gateway (connections accepted during the drain, each
    /// answered once, may hold it for a moment more): the runtime and its store can be dropped
    /// while it answers.
    pub async fn serve_lingering(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(DrainReport, Lingering), ServeError> {
        let addr = listener.local_addr()?;
        if self.tokens().is_empty() && !addr.ip().is_loopback() {
            return Err(ServeError::OpenOnNonLoopback { addr });
        }
        if self.config().forward && self.runtime().address().is_none() {
            return Err(ServeError::ForwardingWithoutOwnership);
        }
        tracing::info!(%addr, tokens = self.tokens().len(), "serving");
        let runtime = self.runtime().clone();
        let deadline = self.config().drain_deadline;
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
                idle: self.config().idle_timeout,
                head: self.config().header_timeout,
            },
            max_connections: self.config().max_connections.max(1),
        };
        let force = CancellationToken::new();
        // What answers once the gateway is done with: every request `503 draining`.
        let draining = Router::new().fallback(|| async { ApiError::Runtime(Error::Draining) });
        let server = listen::serve(
            listener,
            self.router(),
            draining,
            limits,
            drained.clone(),
            force.clone(),
        );
        tokio::pin!(server);
        let grace = self.config().connection_grace;
        let lingering = tokio::select! {
            (lingering, ()) = futures::future::join(&mut server, signal) => lingering,
            () = async { drained.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "connections still open after the grace period; closing");
                force.cancel();
                server.await
            }
        };
        let done = report.lock().take();
        // The server only ends through the signal, which always leaves a report; if axum ever
        // ended on its own, drain now so that nothing is left unflushed.
        let done = match done {
            Some(done) => done,
            None => self.runtime().drain(deadline).await,
        };
        Ok((done, lingering))
    }
}
