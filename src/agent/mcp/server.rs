//! One MCP server's life: connect (spawn or dial), `initialize`, list its tools, follow
//! `notifications/tools/list_changed`, and — when the process exits or the connection drops —
//! start again after a back-off, until turnstile shuts it down (then stop and reap it).
//!
//! The tools of the last listing stay offered while the server is restarting: a call then gets
//! an error result saying so, and the model's view of its tools does not flicker.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::call::{CallSettings, McpTool};
use super::listing::{accept, ListedTool};
use super::spec::{McpServer, McpTransport};
use super::stdio::Process;
use super::{
    transport, McpError, CONNECT_TIMEOUT, HEALTHY_AFTER, LIST_TIMEOUT, MAX_LISTED_TOOLS,
    MAX_LIST_PAGES, MAX_RESTART_BACKOFF, MIN_RELIST_INTERVAL, RESTART_BACKOFF,
};
use crate::agent::openai::Secrets;

/// Where a server's connection stands.
enum State {
    /// Not connected yet, or being started again.
    Down(String),
    /// Connected: calls go to `peer`.
    Up {
        peer: Peer<RoleClient>,
        /// Why a stdio server's output was cut, once it was.
        cut: Option<Arc<Mutex<Option<String>>>>,
    },
    /// Shut down for good.
    Stopped,
}

/// One configured server, shared by its supervisor and its tools.
pub(super) struct Server {
    pub spec: McpServer,
    /// The tools to keep, when `--mcp-allow` names them.
    allow: Option<Arc<HashSet<String>>>,
    state: Mutex<State>,
    /// The tools of the last listing.
    tools: Mutex<Arc<Vec<Arc<McpTool>>>>,
    /// Bumped whenever any server's tools change (shared by the set).
    version: Arc<AtomicU64>,
    /// Notified by `notifications/tools/list_changed`.
    relist: Arc<Notify>,
    pub settings: Arc<CallSettings>,
    /// Header values, kept out of messages.
    pub secrets: Secrets,
    /// Tool names used as metric labels so far (see `call`).
    pub labels: Mutex<HashSet<String>>,
}

impl Server {
    pub(super) fn new(
        spec: McpServer,
        allow: Option<Arc<HashSet<String>>>,
        version: Arc<AtomicU64>,
        settings: Arc<CallSettings>,
    ) -> Arc<Self> {
        let secrets = match &spec.transport {
            McpTransport::Http { headers, .. } => {
                Secrets::from_values(headers.iter().map(|(_, value)| value.as_str()))
            }
            McpTransport::Stdio { env, .. } => {
                Secrets::from_values(env.iter().map(|(_, value)| value.as_str()))
            }
        };
        Arc::new(Self {
            spec,
            allow,
            state: Mutex::new(State::Down("not connected yet".into())),
            tools: Mutex::new(Arc::new(Vec::new())),
            version,
            relist: Arc::new(Notify::new()),
            settings,
            secrets,
            labels: Mutex::new(HashSet::new()),
        })
    }

    /// The server's name.
    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    /// The tools of the last listing.
    pub(super) fn tools(&self) -> Arc<Vec<Arc<McpTool>>> {
        self.tools.lock().clone()
    }

    /// The live connection, or why there is none.
    pub(super) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        match &*self.state.lock() {
            State::Up { peer, .. } => Ok(peer.clone()),
            State::Down(reason) => Err(format!("it is not connected ({reason})")),
            State::Stopped => Err("it was shut down".into()),
        }
    }

    /// Why a stdio server's output was cut, if it was.
    pub(super) fn cut_reason(&self) -> Option<String> {
        match &*self.state.lock() {
            State::Up { cut: Some(cut), .. } => cut.lock().clone(),
            _ => None,
        }
    }

    fn set_state(&self, state: State) {
        let mut current = self.state.lock();
        if !matches!(*current, State::Stopped) {
            *current = state;
        }
    }

    /// Runs the server until `stop`: connects, and after every end of a connection waits its
    /// back-off and connects again. The first attempt's outcome is sent to `first`; when that
    /// attempt fails and `give_up` is set, the supervisor ends there.
    pub(super) async fn supervise(
        self: Arc<Self>,
        stop: CancellationToken,
        first: oneshot::Sender<Result<(), McpError>>,
        give_up: bool,
    ) {
        let mut first = Some(first);
        let mut backoff = RESTART_BACKOFF;
        loop {
            let attempt = tokio::select! {
                () = stop.cancelled() => break,
                attempt = tokio::time::timeout(CONNECT_TIMEOUT, self.connect(&stop)) => attempt,
            };
            let failure = match attempt {
                Ok(Ok(connection)) => {
                    if let Some(first) = first.take() {
                        let _ = first.send(Ok(()));
                    }
                    let since = Instant::now();
                    let Some(reason) = self.serve(connection, &stop).await else {
                        break;
                    };
                    if since.elapsed() >= HEALTHY_AFTER {
                        backoff = RESTART_BACKOFF;
                    }
                    reason
                }
                Ok(Err(error)) => error,
                Err(_) => McpError::StartTimeout {
                    server: self.name().to_owned(),
                    after: CONNECT_TIMEOUT,
                },
            };
            let reason = failure.without_hint();
            self.set_state(State::Down(reason.clone()));
            if let Some(first) = first.take() {
                let _ = first.send(Err(failure));
                if give_up {
                    break;
                }
            }
            tracing::warn!(target: "turnstile::mcp", server = %self.name(), %reason,
                retry_in = ?backoff, "an MCP server is down; starting it again");
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_RESTART_BACKOFF);
        }
        *self.state.lock() = State::Stopped;
    }

    /// Connects, initializes and lists the tools.
    async fn connect(self: &Arc<Self>, stop: &CancellationToken) -> Result<Connection, McpError> {
        let unreachable = |detail: String| McpError::Unreachable {
            server: self.name().to_owned(),
            detail: self.secrets.scrub(&detail),
            optional_hint: true,
        };
        let handler = Handler {
            relist: self.relist.clone(),
        };
        let ct = stop.child_token();
        let (service, process) = match &self.spec.transport {
            McpTransport::Stdio { command, args, env } => {
                let (process, transport) = Process::spawn(self.name(), command, args, env)
                    .map_err(|e| unreachable(format!("cannot run {command:?}: {e}")))?;
                match handler.serve_with_ct(transport, ct.clone()).await {
                    Ok(service) => (service, Some(process)),
                    Err(error) => {
                        let status = process.stop().await;
                        let exited = status.map(|s| format!("; it exited with {s}"));
                        return Err(unreachable(format!(
                            "{error}{}",
                            exited.unwrap_or_default()
                        )));
                    }
                }
            }
            McpTransport::Http { url, headers } => {
                let transport = transport::http(url, headers).map_err(unreachable)?;
                let service = handler
                    .serve_with_ct(transport, ct.clone())
                    .await
                    .map_err(|e| unreachable(e.to_string()))?;
                (service, None)
            }
        };
        let connection = Connection {
            peer: service.peer().clone(),
            cut: process.as_ref().map(|p| p.cut.clone()),
            pid: process.as_ref().and_then(Process::id),
            service,
            process,
            ct,
        };
        match self.list(&connection.peer).await {
            Ok(()) => Ok(connection),
            Err(error) => {
                connection.close().await;
                Err(error)
            }
        }
    }

    /// Serves calls over `connection` and follows list changes until it ends (`Some(why)`) or
    /// `stop` (`None`; the connection is closed and the process reaped).
    async fn serve(
        self: &Arc<Self>,
        connection: Connection,
        stop: &CancellationToken,
    ) -> Option<McpError> {
        self.announce(&connection);
        self.set_state(State::Up {
            peer: connection.peer.clone(),
            cut: connection.cut.clone(),
        });
        let Connection {
            service,
            mut process,
            ct,
            peer,
            cut,
            ..
        } = connection;
        let (done_tx, mut done) = oneshot::channel();
        tokio::spawn(async move {
            let _ = done_tx.send(service.waiting().await);
        });
        let mut listed_at = Instant::now();
        let ended = loop {
            tokio::select! {
                () = stop.cancelled() => break None,
                quit = &mut done => break Some(format!("{quit:?}")),
                // The process can exit while its output stays open (a child of its own holds
                // the pipe): the connection ends with it all the same.
                () = exited(process.as_mut()) => break Some("the process exited".to_owned()),
                () = self.relist.notified() => {
                    // At most one listing per interval, however many notifications came.
                    tokio::select! {
                        () = stop.cancelled() => break None,
                        () = tokio::time::sleep_until(listed_at + MIN_RELIST_INTERVAL) => {}
                    }
                    listed_at = Instant::now();
                    if let Err(error) = self.list(&peer).await {
                        tracing::warn!(target: "turnstile::mcp", server = %self.name(), %error,
                            "cannot list the tools again; the previous list stays offered");
                    }
                }
            }
        };
        ct.cancel();
        let status = match process {
            Some(process) => Some(process.stop().await),
            None => None,
        };
        let Some(quit) = ended else {
            tracing::info!(target: "turnstile::mcp", server = %self.name(), status = ?status,
                "MCP server stopped");
            return None;
        };
        let cut = cut.and_then(|cut| cut.lock().clone());
        let detail = match (cut, status) {
            (Some(cut), _) => cut,
            (None, Some(Ok(status))) => format!("the process exited ({status})"),
            (None, Some(Err(error))) => format!("the process could not be reaped: {error}"),
            (None, None) => format!("the connection ended ({quit})"),
        };
        Some(McpError::Stopped {
            server: self.name().to_owned(),
            detail: self.secrets.scrub(&detail),
        })
    }

    /// Logs a new connection: the server's implementation, version and protocol, its tools.
    fn announce(&self, connection: &Connection) {
        let info = connection.peer.peer_info();
        let implementation = info.as_ref().and_then(|i| i.server_info.as_ref());
        tracing::info!(target: "turnstile::mcp", server = %self.name(),
            implementation = %implementation.map_or("?", |i| i.name.as_str()),
            version = %implementation.map_or("?", |i| i.version.as_str()),
            protocol = %info.as_ref().map(|i| i.protocol_version.to_string()).unwrap_or_default(),
            tools = self.tools().len(), pid = ?connection.pid, "MCP server connected");
    }

    /// Lists the tools (every page, within the bounds) and offers those that pass.
    async fn list(self: &Arc<Self>, peer: &Peer<RoleClient>) -> Result<(), McpError> {
        let refused = |detail: String| McpError::Refused {
            server: self.name().to_owned(),
            detail,
        };
        let listed = tokio::time::timeout(LIST_TIMEOUT, list_pages(peer))
            .await
            .map_err(|_| refused(format!("did not list its tools within {LIST_TIMEOUT:?}")))?
            .map_err(|e| refused(self.secrets.scrub(&e)))?;
        let listing = accept(listed, self.allow.as_deref()).map_err(refused)?;
        for (tool, why) in &listing.left_out {
            tracing::warn!(target: "turnstile::mcp", server = %self.name(), %tool, %why,
                "an MCP tool is not offered to the model");
        }
        self.offer(listing.tools);
        Ok(())
    }

    /// Replaces the tools offered, if they changed.
    fn offer(self: &Arc<Self>, listed: Vec<ListedTool>) {
        let mut tools = self.tools.lock();
        let same = tools.len() == listed.len()
            && tools
                .iter()
                .zip(&listed)
                .all(|(old, new)| old.listed == *new);
        if same {
            return;
        }
        *tools = Arc::new(
            listed
                .into_iter()
                .map(|listed| Arc::new(McpTool::new(Arc::downgrade(self), listed)))
                .collect(),
        );
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// Reads every page of `tools/list`, at most [`MAX_LIST_PAGES`] pages and
/// [`MAX_LISTED_TOOLS`] tools.
async fn list_pages(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = cursor
            .take()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        tools.extend(page.tools);
        if tools.len() > MAX_LISTED_TOOLS {
            return Err(format!(
                "lists more than {MAX_LISTED_TOOLS} tools (the bound on a listing)"
            ));
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!(
        "lists its tools over more than {MAX_LIST_PAGES} pages (the bound on a listing)"
    ))
}

/// A live connection and what it needs to be closed.
struct Connection {
    service: RunningService<RoleClient, Handler>,
    peer: Peer<RoleClient>,
    /// The stdio server's process, reaped when the connection ends.
    process: Option<Process>,
    cut: Option<Arc<Mutex<Option<String>>>>,
    pid: Option<u32>,
    /// Ends rmcp's service loop (which closes the transport: a stdio server's stdin).
    ct: CancellationToken,
}

impl Connection {
    async fn close(self) {
        self.ct.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.service.waiting()).await;
        if let Some(process) = self.process {
            let _ = process.stop().await;
        }
    }
}

/// What turnstile tells the server about itself, and what it does with the server's
/// notifications and requests. It offers no capability (no sampling, roots or elicitation):
/// a server's requests for them are refused; its log notifications and progress are ignored.
struct Handler {
    relist: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }

    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("turnstile", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Completes when `process` has exited; never without one (a server over HTTP).
async fn exited(process: Option<&mut Process>) {
    match process {
        Some(process) => process.exited().await,
        None => std::future::pending().await,
    }
}
