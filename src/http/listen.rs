//! The connection loop behind [`Gateway::serve`](super::Gateway::serve): accepts up to a cap of
//! open connections, closes those that stay idle or send a header block too slowly, and on stop
//! lets each connection finish its request in flight and close.
//!
//! Written on hyper's connection API rather than `axum::serve` because `axum::serve` offers no
//! header or idle timeout and no connection cap, which is what a slow or hostile client abuses.
//!
//! # Layout
//!
//! - `phase`: where a connection is between requests, and the deadline that follows.
//! - `io`: the socket read under that deadline, and the response body that ends a request.

mod io;
mod phase;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

pub(crate) use phase::ReadLimits;

use io::{DeadlineIo, MarkedBody, Serving};
use phase::Phase;

/// How long accepting pauses after it failed for want of descriptors (or another resource):
/// long enough not to spin on a full table, short enough that a freed descriptor serves the
/// next client at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Descriptors left out of the default connection cap: the store's files and sockets, the
/// forwarding client's connections and the listener itself need some. An eighth of the limit,
/// and at least this many.
const MIN_DESCRIPTOR_RESERVE: usize = 64;

/// The most connections a process may hold open by default: its descriptor limit less a
/// reserve, so that `accept` never fails with EMFILE while the store still needs a descriptor.
/// Read from `/proc/self/limits`; 1024 (the usual soft limit) where that cannot be read.
pub fn default_max_connections() -> usize {
    let limit = descriptor_limit().unwrap_or(1024);
    let reserve = (limit / 8).max(MIN_DESCRIPTOR_RESERVE);
    limit.saturating_sub(reserve).max(1)
}

/// The soft limit on open descriptors, on Linux.
fn descriptor_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line.split_whitespace().nth(3)? {
        "unlimited" => Some(usize::MAX / 2),
        soft => soft.parse().ok(),
    }
}

/// What the connection loop enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub read: ReadLimits,
    /// Open connections at most; the listener waits (the kernel queues new ones) at the cap.
    pub max_connections: usize,
}

/// How long the last connections, accepted while the server stopped, get to be answered once
/// the listener closes: each serves one request (a `503 draining`, say), so this is only for a
/// response being written.
const LATE_GRACE: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `stop` fires, then lets every open connection finish
/// the request it is serving and waits for all of them to close; `force` closes those still
/// open. Meanwhile the listener stays open: a connection accepted after `stop` is served one
/// request (the router answers what a stopping server answers, `503 draining` for a turn) and
/// closed, so that clients and load balancers hear the documented answer rather than a refused
/// connection until the server is gone. Once the old connections are gone the listener is
/// handed on, still open, in the returned [`Lingering`], which answers every request `draining`
/// (and holds nothing of `router`) until it is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    draining: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    force: CancellationToken,
) -> Lingering {
    let mut accept = Accept {
        listener,
        router,
        read: limits.read,
        permits: Arc::new(Semaphore::new(limits.max_connections)),
    };
    let connections = TaskTracker::new();
    let running = Ends {
        stop: stop.clone(),
        force: force.clone(),
        one_request: false,
    };
    accept.until(stop.cancelled(), &connections, &running).await;
    // The connections open at the stop finish their request and close; new ones get one
    // answer each, until the last of the old ones is gone (or `force`).
    connections.close();
    let late = TaskTracker::new();
    // Cut when the lingering listener closes: nothing of it outlives the server.
    let late_force = CancellationToken::new();
    let one_request = Ends {
        stop: CancellationToken::new(),
        force: late_force.clone(),
        one_request: true,
    };
    let old_ones_done = async {
        tokio::select! {
            () = connections.wait() => {}
            () = force.cancelled() => {}
        }
    };
    accept.until(old_ones_done, &late, &one_request).await;
    // From now on the server's own routes are done with; what is left of the process (its
    // store closing, its tool servers stopping) is answered `draining` by a router that holds
    // none of them.
    accept.router = draining;
    let closed = CancellationToken::new();
    let task = tokio::spawn({
        let (closed, late_force) = (closed.clone(), late_force.clone());
        async move {
            accept.until(closed.cancelled(), &late, &one_request).await;
            // New clients are refused from now on rather than queued for a server that has
            // stopped.
            drop(accept);
            late.close();
            if tokio::time::timeout(LATE_GRACE, late.wait()).await.is_err() {
                late_force.cancel();
                late.wait().await;
            }
        }
    });
    Lingering {
        closed,
        cut: late_force,
        task: Some(task),
    }
}

/// A stopped server's listener, still open: every connection accepted is answered one
/// request, `503 draining`, and closed. Dropping it stops accepting at once (connections being
/// answered are cut); [`Lingering::close`] also gives them up to a second to be answered.
#[derive(Debug)]
pub struct Lingering {
    closed: CancellationToken,
    /// Cuts the connections being answered.
    cut: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Lingering {
    /// Stops accepting (new connections are refused from now on) and waits, up to a second, for
    /// the connections being answered.
    pub async fn close(mut self) {
        self.closed.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        self.closed.cancel();
        self.cut.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What accepting a connection needs.
struct Accept {
    listener: TcpListener,
    router: Router,
    read: ReadLimits,
    /// One per open connection, up to the cap.
    permits: Arc<Semaphore>,
}

impl Accept {
    /// Accepts connections into `tracker`, each ended as `ends` says, until `end` completes.
    /// A connection whose `stop` never fires serves one request and closes.
    async fn until(&self, end: impl Future<Output = ()>, tracker: &TaskTracker, ends: &Ends) {
        tokio::pin!(end);
        loop {
            let permit = tokio::select! {
                biased;
                () = &mut end => return,
                permit = self.permits.clone().acquire_owned() => {
                    permit.expect("the connection semaphore is never closed")
                }
            };
            let tcp = tokio::select! {
                biased;
                () = &mut end => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((tcp, _peer)) => tcp,
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                },
            };
            tracker.spawn(serve_connection(
                tcp,
                self.router.clone(),
                self.read,
                ends.clone(),
                permit,
            ));
        }
    }
}

/// A failed `accept`: a connection that died in the queue is skipped; anything else (EMFILE,
/// ENFILE, ENOBUFS) pauses accepting briefly rather than spinning.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!("accepting a connection failed: {error}; pausing {ACCEPT_BACKOFF:?}");
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}

/// How a connection is told to end: `stop` after its request in flight, `force` at once; with
/// `one_request` (accepted while the server stops) it serves one request without keep-alive
/// and closes.
#[derive(Clone)]
struct Ends {
    stop: CancellationToken,
    force: CancellationToken,
    one_request: bool,
}

/// One connection, from accept to close; its permit is released when it ends.
async fn serve_connection(
    tcp: TcpStream,
    router: Router,
    read: ReadLimits,
    ends: Ends,
    _permit: OwnedSemaphorePermit,
) {
    // Answers are small and written at once: Nagle's delay would only add latency.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("cannot set TCP_NODELAY: {e}");
    }
    let open = metrics::gauge!("turnstile_http_connections");
    open.increment(1.0);
    let phase = Arc::new(Phase::new(Instant::now()));
    let io = TokioIo::new(DeadlineIo::new(tcp, phase.clone(), read));
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let serving = Serving::start(phase.clone());
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| MarkedBody::new(body, serving)))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(!ends.one_request)
        .serve_connection(io, service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        // Dropping the connection closes its socket and drops its response.
        () = ends.force.cancelled() => Ok(()),
        () = ends.stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            tokio::select! {
                ended = connection.as_mut() => ended,
                // Dropping the connection closes its socket and drops its response.
                () = ends.force.cancelled() => Ok(()),
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!("connection ended: {e}");
    }
    open.decrement(1.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_descriptors_for_the_store() {
        let cap = default_max_connections();
        let limit = descriptor_limit().unwrap_or(1024);
        assert!(cap >= 1);
        assert!(cap + MIN_DESCRIPTOR_RESERVE <= limit, "{cap} of {limit}");
    }
}
