//! Tools for the model from Model Context Protocol servers: [`McpTools`] connects to each
//! [`McpServer`] (a child process over stdio, or Streamable HTTP), lists its tools, follows
//! `notifications/tools/list_changed`, and offers them to [`OpenAiAgent`](super::OpenAiAgent)
//! (`with_mcp`) beside the application's own tools.
//!
//! # Why rmcp
//!
//! `rmcp` is the official Rust SDK, maintained in the protocol's own organisation beside the
//! specification and the reference servers, so it follows new protocol versions first. It
//! speaks both transports turnstile needs, negotiates the protocol version, pages listings,
//! tells the server `notifications/cancelled` when a request's future is dropped (how an
//! interrupt or a timeout reaches a running tool), and bounds what it reads (SSE events and
//! JSON bodies over HTTP, lines over stdio). The rest is turnstile's: the child processes
//! (spawned in a process group and reaped on shutdown), restarts with back-off, the bounds on
//! what a server may offer and answer, and how calls are recorded.
//!
//! # Every server is an untrusted peer
//!
//! What a server controls is bounded by the constants below (tools, names, descriptions,
//! schemas, a message's size, how fast it may ask for a new listing, its stderr); past a bound
//! the server is refused, the tool left out, or the call answered with an error result the
//! model sees. One server's failure never reaches a session that does not call it: a call to a
//! server that is down or restarting is an error result, and the turn goes on.

use std::time::Duration;

mod call;
mod error;
mod listing;
mod server;
mod spec;
mod stdio;
mod tools;
mod transport;

pub use error::McpError;
pub use spec::{McpServer, McpTransport};
pub use tools::{McpTools, McpToolsBuilder};

/// The default wait for one `tools/call` (`--tool-timeout`): tools that search or fetch take
/// seconds; one that has said nothing for a minute is stuck, and the turn (and the session's
/// queue behind it) should not wait longer.
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The default bound on a tool result handed to the model and recorded, in bytes: 64 KiB is
/// about 16,000 tokens, already much of a small model's context; a longer result is cut there
/// and says so.
pub(crate) const DEFAULT_MAX_RESULT_BYTES: usize = 64 * 1024;

/// The largest JSON-RPC message read from a server, in bytes. A result the model sees is at most
/// [`DEFAULT_MAX_RESULT_BYTES`], but a server may send more before it is cut (images in base64,
/// a long listing); 8 MiB holds that with room. A stdio server that sends a longer line is
/// stopped and restarted (the line is never held whole), and over HTTP the message is refused.
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// Tools one server may offer. Chat APIs take at most 128 tools per request, and a model
/// chooses poorly among more than a few dozen; a server that lists more is refused until
/// `--mcp-allow` picks its tools.
pub(crate) const MAX_TOOLS_PER_SERVER: usize = 128;

/// Tools a server's listing may hold before `--mcp-allow` picks from it, over all its pages:
/// bounds what a listing that never ends costs.
pub(crate) const MAX_LISTED_TOOLS: usize = 1024;

/// Pages of one `tools/list` read at most (a page holds many tools).
pub(crate) const MAX_LIST_PAGES: usize = 16;

/// The largest input schema of one tool, serialized: real ones are a few hundred bytes to a
/// few kilobytes, and each is sent to the model with every request.
pub(crate) const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The longest tool description kept, in characters (longer ones are cut): chat APIs take
/// about this much, and every description is sent with every request.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1024;

/// How long connecting, `initialize` and the first listing may take: a local process starts in
/// about a second (`npx` fetching a package takes longer: install it first), a remote server
/// answers in well under this.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a `tools/list` after `notifications/tools/list_changed` may take.
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest time between two listings after `notifications/tools/list_changed`: a server
/// that sends the notification in a loop costs one listing a second, not one per notification.
pub(crate) const MIN_RELIST_INTERVAL: Duration = Duration::from_secs(1);

/// The first wait before a server that exited or dropped its connection is started again; it
/// doubles per failure up to [`MAX_RESTART_BACKOFF`].
pub(crate) const RESTART_BACKOFF: Duration = Duration::from_millis(500);

/// The longest wait between two restarts: a server that keeps crashing costs a start every
/// half minute, and one that comes back is used again within that.
pub(crate) const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(30);

/// A connection that lasted this long resets the back-off: the server was healthy.
pub(crate) const HEALTHY_AFTER: Duration = Duration::from_secs(60);

/// How long a stdio server gets to exit after its stdin is closed (and again after SIGTERM)
/// when turnstile shuts it down, before its process group is killed: a server exits within
/// milliseconds of its input ending; one still there after a second is stuck or ignores it.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
