//! The MCP options of `serve` and `chat`: the servers whose tools `--agent openai` offers the
//! model (`--mcp`), their headers, the tools kept, and the call timeout.

use std::time::Duration;

use clap::Args;

/// MCP servers for the model's tools.
#[derive(Debug, Clone, Default, Args)]
pub struct McpArgs {
    /// With `--agent openai`: an MCP server whose tools the model is offered (repeatable).
    /// `[NAME=]stdio:COMMAND ARGS…` runs a child process of this one (restarted if it exits;
    /// its stderr goes to the log), with only HOME, PATH, USER, LANG and the like from this
    /// environment (see --mcp-env); `[NAME=]http://…` or `https://…` is a Streamable HTTP
    /// endpoint. NAME (in logs, metrics and the history) defaults to the command's file name or
    /// the URL's host.
    #[arg(long = "mcp", value_name = "SPEC")]
    servers: Vec<String>,
    /// A header sent to HTTP MCP servers, `[SERVER=]NAME: VALUE` (repeatable); SERVER is
    /// needed when there are several. A VALUE of `env:VAR` is read from the variable VAR, so
    /// that no secret is on the command line: `--mcp-header 'Authorization: env:DOCS_TOKEN'`
    /// with DOCS_TOKEN='Bearer …'.
    #[arg(long = "mcp-header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Offer only these MCP tools (comma-separated names, from whichever server lists them).
    #[arg(long = "mcp-allow", value_name = "NAMES", value_delimiter = ',')]
    allow: Option<Vec<String>>,
    /// Start even when an MCP server cannot be reached (it is tried again in the background,
    /// and its tools are offered once it answers).
    #[arg(long)]
    mcp_optional: bool,
    /// Pass this variable of this environment on to stdio MCP servers (repeatable): they get
    /// only HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_ALL, LC_CTYPE, TZ and TMPDIR
    /// otherwise, so that the model's API key never reaches them.
    #[arg(long = "mcp-env", value_name = "VAR")]
    env: Vec<String>,
    /// Seconds one MCP tool call may take; past it the call is cancelled on the server and the
    /// model gets an error result. Default 60.
    #[arg(long, value_name = "SECS", value_parser = super::limits_arg::parse_seconds)]
    tool_timeout: Option<Duration>,
}

impl McpArgs {
    /// Whether any MCP server is given.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// Why `--mcp` is refused with another agent than the model.
pub const NOT_A_MODEL: &str = "--mcp gives tools to a model: it needs --agent openai";

/// The connected servers, if any; shut them down when the command is done.
#[derive(Debug, Default)]
pub struct Mcp {
    #[cfg(feature = "mcp")]
    tools: Option<turnstile::McpTools>,
}

impl Mcp {
    /// Whether servers were started.
    pub fn is_connected(&self) -> bool {
        #[cfg(feature = "mcp")]
        return self.tools.is_some();
        #[cfg(not(feature = "mcp"))]
        false
    }

    /// The tools for the model agent.
    #[cfg(feature = "mcp")]
    pub fn tools(&self) -> Option<turnstile::McpTools> {
        self.tools.clone()
    }

    /// Stops the servers (reaping stdio ones).
    pub async fn shutdown(&self) {
        #[cfg(feature = "mcp")]
        if let Some(tools) = &self.tools {
            tools.shutdown().await;
        }
    }
}

/// Starts the servers `args` names (none: nothing to start) for an agent that uses tools
/// (`model`: `--agent openai`); any other agent with `--mcp` is refused before anything starts.
#[cfg(feature = "mcp")]
pub async fn connect(args: &McpArgs, model: bool) -> Result<Mcp, String> {
    if args.is_empty() {
        return Ok(Mcp::default());
    }
    if !model {
        return Err(NOT_A_MODEL.into());
    }
    let servers = servers(args, |var| std::env::var(var).ok())?;
    let mut builder = turnstile::McpTools::builder().optional(args.mcp_optional);
    for server in servers {
        builder = builder.server(server);
    }
    if let Some(allow) = &args.allow {
        builder = builder.with_allowed_tools(allow.iter().map(|name| name.trim().to_owned()));
    }
    if let Some(timeout) = args.tool_timeout {
        builder = builder.with_call_timeout(timeout);
    }
    let tools = builder.connect().await.map_err(|e| e.to_string())?;
    Ok(Mcp { tools: Some(tools) })
}

/// Without the `mcp` feature, `--mcp` is refused.
#[cfg(not(feature = "mcp"))]
pub async fn connect(args: &McpArgs, model: bool) -> Result<Mcp, String> {
    if args.is_empty() {
        return Ok(Mcp::default());
    }
    if !model {
        return Err(NOT_A_MODEL.into());
    }
    Err("this turnstile was built without the `mcp` feature; rebuild with it".into())
}

/// The servers `args` describe, headers and variables attached; `env` reads a variable.
#[cfg(feature = "mcp")]
fn servers(
    args: &McpArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<turnstile::McpServer>, String> {
    let mut servers = args
        .servers
        .iter()
        .map(|spec| spec.parse::<turnstile::McpServer>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let http: Vec<String> = servers
        .iter()
        .filter(|s| s.is_http())
        .map(|s| s.name().to_owned())
        .collect();
    for header in &args.headers {
        let (server, name, value) = parse_header(header)?;
        let target = match server {
            Some(server) if http.contains(&server) => server,
            Some(server) => {
                return Err(format!(
                    "--mcp-header {header:?} names {server:?}, which is not an HTTP MCP server \
                     given with --mcp"
                ))
            }
            None if http.len() == 1 => http[0].clone(),
            None => {
                return Err(format!(
                    "--mcp-header {header:?} must name its server as SERVER=NAME: VALUE when \
                     there is not exactly one HTTP MCP server"
                ))
            }
        };
        let value = match value.strip_prefix("env:") {
            Some(var) => env(var)
                .ok_or_else(|| format!("--mcp-header {name}: the variable {var} is not set"))?,
            None => value,
        };
        for server in servers.iter_mut().filter(|s| s.name() == target) {
            *server = server.clone().with_header(name.clone(), value.clone());
        }
    }
    for var in &args.env {
        let value = env(var).ok_or_else(|| format!("--mcp-env {var}: the variable is not set"))?;
        for server in servers.iter_mut().filter(|s| !s.is_http()) {
            *server = server.clone().with_env(var.clone(), value.clone());
        }
    }
    Ok(servers)
}

/// `[SERVER=]NAME: VALUE` as its parts.
#[cfg(feature = "mcp")]
fn parse_header(text: &str) -> Result<(Option<String>, String, String), String> {
    let (head, value) = text
        .split_once(':')
        .ok_or_else(|| format!("--mcp-header {text:?} is not NAME: VALUE"))?;
    let (server, name) = match head.split_once('=') {
        Some((server, name)) => (Some(server.trim().to_owned()), name.trim()),
        None => (None, head.trim()),
    };
    if name.is_empty() {
        return Err(format!("--mcp-header {text:?} has no header name"));
    }
    Ok((server, name.to_owned(), value.trim().to_owned()))
}

#[cfg(all(test, feature = "mcp"))]
mod tests {
    use super::*;

    fn args(servers: &[&str], headers: &[&str], env: &[&str]) -> McpArgs {
        McpArgs {
            servers: servers.iter().map(|s| (*s).to_owned()).collect(),
            headers: headers.iter().map(|s| (*s).to_owned()).collect(),
            env: env.iter().map(|s| (*s).to_owned()).collect(),
            ..McpArgs::default()
        }
    }

    fn vars(name: &str) -> Option<String> {
        (name == "DOCS_TOKEN").then(|| "Bearer secret-token-123".to_owned())
    }

    #[test]
    fn headers_go_to_their_server_with_values_from_the_environment() {
        let parsed = servers(
            &args(
                &["stdio:mcp-server-time", "docs=https://127.0.0.1/mcp"],
                &["Authorization: env:DOCS_TOKEN", "X-Team: 7"],
                &[],
            ),
            vars,
        )
        .unwrap();
        let turnstile::McpTransport::Http { headers, .. } = parsed[1].transport() else {
            panic!("{parsed:?}")
        };
        assert_eq!(
            headers,
            &[
                (
                    "Authorization".to_owned(),
                    "Bearer secret-token-123".to_owned()
                ),
                ("X-Team".to_owned(), "7".to_owned())
            ]
        );
    }

    #[test]
    fn ambiguous_or_unset_headers_are_refused() {
        let two = ["a=http://127.0.0.1/mcp", "b=http://127.0.0.1/mcp"];
        let error = servers(&args(&two, &["X: 1"], &[]), vars).unwrap_err();
        assert!(error.contains("SERVER=NAME: VALUE"), "{error}");
        let named = servers(&args(&two, &["b=X: 1"], &[]), vars).unwrap();
        assert!(matches!(named[0].transport(),
            turnstile::McpTransport::Http { headers, .. } if headers.is_empty()));
        let error = servers(&args(&two, &["c=X: 1"], &[]), vars).unwrap_err();
        assert!(error.contains("not an HTTP MCP server"), "{error}");
        let error = servers(&args(&two[..1], &["X: env:NOPE"], &[]), vars).unwrap_err();
        assert!(error.contains("NOPE is not set"), "{error}");
        let error = servers(&args(&two[..1], &["no colon"], &[]), vars).unwrap_err();
        assert!(error.contains("NAME: VALUE"), "{error}");
    }

    #[test]
    fn passed_variables_reach_stdio_servers_only() {
        let parsed = servers(
            &args(&["stdio:srv", "http://127.0.0.1/mcp"], &[], &["DOCS_TOKEN"]),
            vars,
        )
        .unwrap();
        let turnstile::McpTransport::Stdio { env, .. } = parsed[0].transport() else {
            panic!("{parsed:?}")
        };
        assert_eq!(env[0].0, "DOCS_TOKEN");
        let error = servers(&args(&["stdio:srv"], &[], &["NOPE"]), vars).unwrap_err();
        assert!(error.contains("NOPE: the variable is not set"), "{error}");
    }
}
