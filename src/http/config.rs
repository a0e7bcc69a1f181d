//! The gateway's limits and whether it forwards, with their defaults.

use std::time::Duration;

use super::listen::default_max_connections;

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
