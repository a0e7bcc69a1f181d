//! [`McpError`]: why MCP servers could not be set up, in words a person can act on.
//!
//! A tool call that fails never becomes an `McpError`: it is an error result the model sees
//! (see `call`). These are the failures of starting: a spec that does not parse, a server that
//! cannot be reached or that offers what turnstile refuses, two tools with one name.

use std::time::Duration;

/// Why [`McpTools`](super::McpTools) could not start (or a server could not be connected). No
/// variant carries a header value: messages name the server and what it did, scrubbed of the
/// headers' values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server's spec (`--mcp`, or the `McpServer` built in code) is not usable.
    #[error("MCP server {spec:?}: {reason}")]
    Spec {
        /// The spec as written, or the server's name.
        spec: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// Two servers have one name.
    #[error(
        "two MCP servers are named {name:?}; give each its own name with --mcp NAME=SPEC \
         (McpServer's name in code)"
    )]
    DuplicateServer {
        /// The name.
        name: String,
    },
    /// The server could not be started or reached, or failed the `initialize` handshake or its
    /// first `tools/list`.
    #[error(
        "cannot start MCP server {server:?}: {detail}{}",
        if *.optional_hint { " (start anyway without it with --mcp-optional)" } else { "" }
    )]
    Unreachable {
        /// The server's name.
        server: String,
        /// What happened.
        detail: String,
        /// Whether the message suggests `--mcp-optional`.
        optional_hint: bool,
    },
    /// A running server's process exited or its connection ended (it is started again).
    #[error("MCP server {server:?} stopped: {detail}")]
    Stopped {
        /// The server's name.
        server: String,
        /// How it ended.
        detail: String,
    },
    /// Connecting, `initialize` and the first listing took longer than allowed.
    #[error("MCP server {server:?} did not finish starting within {after:?}")]
    StartTimeout {
        /// The server's name.
        server: String,
        /// The bound ([`CONNECT_TIMEOUT`](super::CONNECT_TIMEOUT)).
        after: Duration,
    },
    /// The server offers more than turnstile accepts (too many tools, a listing without end).
    #[error("MCP server {server:?} {detail}")]
    Refused {
        /// The server's name.
        server: String,
        /// What it offered and the bound it broke.
        detail: String,
    },
    /// Two servers offer a tool of the same name: the model could not tell them apart.
    #[error(
        "the tool {tool:?} is offered by MCP servers {first:?} and {second:?}; leave one out \
         with --mcp-allow (it names the tools to keep)"
    )]
    DuplicateTool {
        /// The tool's name.
        tool: String,
        /// The server listed first.
        first: String,
        /// The other server.
        second: String,
    },
}

impl McpError {
    /// The message without the hint meant for the command line (`--mcp-optional`), as a call
    /// to a server that is down reads it.
    pub(super) fn without_hint(&self) -> String {
        match self {
            Self::Unreachable { server, detail, .. } => Self::Unreachable {
                server: server.clone(),
                detail: detail.clone(),
                optional_hint: false,
            }
            .to_string(),
            other => other.to_string(),
        }
    }
}
