//! [`McpTools`]: the MCP servers of one agent (or one `serve`), started together, their tools
//! offered as one list, and shut down together.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use super::call::CallSettings;
use super::server::Server;
use super::{McpError, McpServer, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_RESULT_BYTES};
use crate::agent::Tool;

/// The tools offered at one version of the servers' lists.
pub(crate) type Offered = Arc<Vec<Arc<dyn Tool>>>;

/// Running connections to MCP servers, whose tools an [`OpenAiAgent`](crate::OpenAiAgent)
/// offers the model (`OpenAiBuilder::with_mcp`) beside its own.
///
/// Each server is supervised in the background: a stdio server that exits, or an HTTP server
/// whose connection drops, is started again after a back-off (doubling from 0.5 s to 30 s), and
/// a server's `notifications/tools/list_changed` brings its new list to the next turn. Clones
/// share the servers. [`McpTools::shutdown`] stops them (a stdio server gets its stdin closed,
/// then SIGTERM, then SIGKILL, and is reaped); dropping the last clone stops them too, without
/// waiting.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use turnstile::{McpServer, McpTools, OpenAiAgent};
///
/// let tools = McpTools::builder()
///     .server(McpServer::stdio("time", "mcp-server-time", ["--local-timezone", "UTC"]))
///     .server("docs=https://127.0.0.1:8443/mcp".parse::<McpServer>()?)
///     .connect()
///     .await?;
/// let agent = OpenAiAgent::builder("http://127.0.0.1:11434/v1", "llama3.2")
///     .with_mcp(tools.clone())
///     .build()?;
/// // … serve turns; when done:
/// tools.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpTools {
    inner: Arc<Inner>,
}

struct Inner {
    servers: Vec<Arc<Server>>,
    /// Stops every supervisor; cancelled by [`McpTools::shutdown`] or when this is dropped.
    stop: CancellationToken,
    supervisors: TaskTracker,
    /// Bumped by a server whose tools changed.
    version: Arc<AtomicU64>,
    /// The combined list at some version.
    cached: Mutex<Option<(u64, Offered)>>,
    _stop_on_drop: DropGuard,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inner.servers.iter().map(|s| s.name()).collect();
        f.debug_struct("McpTools")
            .field("servers", &names)
            .finish_non_exhaustive()
    }
}

/// Builds [`McpTools`]; start with [`McpTools::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct McpToolsBuilder {
    servers: Vec<McpServer>,
    allow: Option<HashSet<String>>,
    optional: bool,
    timeout: Duration,
    max_result_bytes: usize,
}

impl McpTools {
    /// Starts configuring a set of servers.
    pub fn builder() -> McpToolsBuilder {
        McpToolsBuilder {
            servers: Vec::new(),
            allow: None,
            optional: false,
            timeout: DEFAULT_CALL_TIMEOUT,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }

    /// The tools offered now, in the order offered, for an agent of your own: call one with
    /// [`Tool::call`] (within its timeout, cancelled on the server when the future is dropped)
    /// and record it with [`TurnContext::tool_call_via`](crate::TurnContext::tool_call_via)
    /// and [`Tool::server`].
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.current().1.as_ref().clone()
    }

    /// The names of the tools offered now, with their servers' names, in the order offered.
    pub fn tool_names(&self) -> Vec<(String, String)> {
        self.current()
            .1
            .iter()
            .map(|t| {
                let server = t.server().unwrap_or_default().to_owned();
                (server, t.name().to_owned())
            })
            .collect()
    }

    /// The tools offered now and the version of that list (it changes when a server's list
    /// does). A tool whose name an earlier server's tool took is left out (and logged).
    pub(crate) fn current(&self) -> (u64, Offered) {
        let version = self.inner.version.load(Ordering::Acquire);
        let mut cached = self.inner.cached.lock();
        if let Some((at, tools)) = &*cached {
            if *at == version {
                return (version, tools.clone());
            }
        }
        let mut taken: HashMap<String, String> = HashMap::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.inner.servers {
            for tool in server.tools().iter() {
                if let Some(first) = taken.get(tool.name()) {
                    tracing::warn!(target: "turnstile::mcp", tool = %tool.name(),
                        server = %server.name(), offered_by = %first,
                        "an MCP tool has the name of another server's tool; it is not offered");
                    continue;
                }
                taken.insert(tool.name().to_owned(), server.name().to_owned());
                tools.push(tool.clone());
            }
        }
        let tools = Arc::new(tools);
        *cached = Some((version, tools.clone()));
        (version, tools)
    }

    /// Stops every server and waits until each is stopped (a stdio server reaped). Calls
    /// running meanwhile fail as error results. Calling it again does nothing.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.supervisors.close();
        self.inner.supervisors.wait().await;
    }
}

impl McpToolsBuilder {
    /// Adds a server.
    pub fn server(mut self, server: McpServer) -> Self {
        self.servers.push(server);
        self
    }

    /// Offers only the tools named here, from whichever server lists them (all tools by
    /// default; `--mcp-allow`).
    pub fn with_allowed_tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allow = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// With `true`, a server that cannot be started is logged and retried in the background
    /// instead of failing [`connect`](Self::connect) (`--mcp-optional`). Default `false`.
    pub fn optional(mut self, optional: bool) -> Self {
        self.optional = optional;
        self
    }

    /// The longest wait for one tool call (default 60 s; `--tool-timeout`). Past it the call
    /// is cancelled on the server and the model gets an error result.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest result handed to the model, in bytes (default 64 KiB); a longer one is cut
    /// and says so.
    pub fn with_max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Starts every server, waits for each to be connected with its tools listed, and checks
    /// that no two offer a tool of the same name. A server that cannot be started fails this
    /// (and the others are stopped) unless [`optional`](Self::optional).
    pub async fn connect(self) -> Result<McpTools, McpError> {
        if self.timeout.is_zero() {
            return Err(McpError::Spec {
                spec: "--tool-timeout".into(),
                reason: "the tool timeout must be positive".into(),
            });
        }
        let mut names = HashSet::new();
        for server in &self.servers {
            server.check()?;
            if !names.insert(server.name().to_owned()) {
                return Err(McpError::DuplicateServer {
                    name: server.name().to_owned(),
                });
            }
        }
        let settings = Arc::new(CallSettings {
            timeout: self.timeout,
            max_result_bytes: self.max_result_bytes,
        });
        let allow = self.allow.map(Arc::new);
        let version = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let supervisors = TaskTracker::new();
        let mut firsts = Vec::new();
        let mut servers = Vec::new();
        for spec in self.servers {
            let server = Server::new(spec, allow.clone(), version.clone(), settings.clone());
            let (first, started) = oneshot::channel();
            supervisors.spawn(
                server
                    .clone()
                    .supervise(stop.clone(), first, !self.optional),
            );
            firsts.push(started);
            servers.push(server);
        }
        let tools = McpTools {
            inner: Arc::new(Inner {
                servers,
                _stop_on_drop: stop.clone().drop_guard(),
                stop,
                supervisors,
                version,
                cached: Mutex::new(None),
            }),
        };
        let started = futures::future::join_all(firsts).await;
        for (server, started) in tools.inner.servers.iter().zip(started) {
            let outcome = started.unwrap_or_else(|_| {
                Err(McpError::Unreachable {
                    server: server.name().to_owned(),
                    detail: "its supervisor ended before it started".into(),
                    optional_hint: true,
                })
            });
            match outcome {
                Ok(()) => {}
                Err(error) if self.optional => {
                    tracing::warn!(target: "turnstile::mcp", server = %server.name(), %error,
                        "an optional MCP server is not available; it is tried again in the \
                         background");
                }
                Err(error) => {
                    tools.shutdown().await;
                    return Err(error);
                }
            }
        }
        if let Err(error) = tools.check_unique() {
            tools.shutdown().await;
            return Err(error);
        }
        if let Some(allow) = &allow {
            let offered: HashSet<String> = tools.tool_names().into_iter().map(|(_, t)| t).collect();
            for name in allow.iter().filter(|name| !offered.contains(*name)) {
                tracing::warn!(target: "turnstile::mcp", tool = %name,
                    "--mcp-allow names a tool that no MCP server offers");
            }
        }
        Ok(tools)
    }
}

impl McpTools {
    /// Refuses two servers offering tools of one name.
    fn check_unique(&self) -> Result<(), McpError> {
        let mut taken: HashMap<String, String> = HashMap::new();
        for server in &self.inner.servers {
            for tool in server.tools().iter() {
                if let Some(first) = taken.insert(tool.name().to_owned(), server.name().to_owned())
                {
                    return Err(McpError::DuplicateTool {
                        tool: tool.name().to_owned(),
                        first,
                        second: server.name().to_owned(),
                    });
                }
            }
        }
        Ok(())
    }
}
