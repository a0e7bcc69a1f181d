//! [`McpServer`]: where one MCP server is and how to reach it, and the `--mcp` spelling of it
//! (`[NAME=]stdio:COMMAND ARGS…`, `[NAME=]http://…`, `[NAME=]https://…`). Pure: no I/O.

use std::str::FromStr;

use super::McpError;

/// The longest server name: it is shown in logs, recorded with each call and used as a metric
/// label.
const MAX_NAME_CHARS: usize = 64;

/// Variables a stdio server inherits from turnstile's environment, unless more are passed with
/// [`McpServer::with_env`]: what programs need to find themselves and their files (the same
/// set the MCP reference clients pass). Everything else — the model's API key above all — stays
/// out of a process turnstile did not write.
pub(crate) const INHERITED_ENV: [&str; 11] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR",
];

/// How to reach an MCP server. Its `Debug` output names headers and variables but never shows
/// their values (a header often carries a token).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin and stdout; its stderr goes to the log.
    Stdio {
        /// The program, found on `PATH` when it has no slash.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it besides [`INHERITED_ENV`], `(name, value)`.
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// `http://…` or `https://…`.
        url: String,
        /// Headers sent with every request (`Authorization` and the like), `(name, value)`.
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        match self {
            Self::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &names(env))
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

/// One MCP server: a name (in logs, metrics and the recorded calls) and its transport.
///
/// `"time=stdio:mcp-server-time --local-timezone UTC".parse::<McpServer>()` is the spelling of
/// `--mcp`; without `NAME=`, a stdio server is named after its program's file name and an HTTP
/// one after its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub(super) name: String,
    pub(super) transport: McpTransport,
}

impl McpServer {
    /// A server run as `command args…`, speaking over its stdin and stdout.
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
            },
        }
    }

    /// A server at a Streamable HTTP endpoint.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http {
                url: url.into(),
                headers: Vec::new(),
            },
        }
    }

    /// Sends this header with every request to an HTTP server (ignored for stdio). Its value
    /// is kept out of every message and log line.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self.transport {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// Sets this variable for a stdio server (ignored for HTTP).
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.push((name.into(), value.into()));
        }
        self
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How it is reached.
    pub fn transport(&self) -> &McpTransport {
        &self.transport
    }

    /// Whether it is reached over HTTP.
    pub fn is_http(&self) -> bool {
        matches!(self.transport, McpTransport::Http { .. })
    }

    /// Checks the name and the transport's settings.
    pub(super) fn check(&self) -> Result<(), McpError> {
        check_name(&self.name)?;
        let bad = |reason: String| McpError::Spec {
            spec: self.name.clone(),
            reason,
        };
        match &self.transport {
            McpTransport::Stdio { command, .. } if command.is_empty() => {
                Err(bad("the command is empty".into()))
            }
            McpTransport::Stdio { .. } => Ok(()),
            McpTransport::Http { url, headers } => {
                let parsed = reqwest_mcp::Url::parse(url)
                    .map_err(|e| bad(format!("{url:?} is not a URL: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    return Err(bad(format!(
                        "{url:?} must be http://HOST… or https://HOST…"
                    )));
                }
                for (name, value) in headers {
                    reqwest_mcp::header::HeaderName::try_from(name.as_str())
                        .map_err(|_| bad(format!("{name:?} is not a valid header name")))?;
                    reqwest_mcp::header::HeaderValue::try_from(value.as_str())
                        .map_err(|_| bad(format!("the value of header {name} is not valid")))?;
                    if RESERVED_HEADERS
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(name))
                    {
                        return Err(bad(format!(
                            "header {name} is set by the MCP transport itself"
                        )));
                    }
                }
                Ok(())
            }
        }
    }
}

/// Headers the Streamable HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// A server name: letters, digits, `_`, `-` and `.`, at most [`MAX_NAME_CHARS`].
fn check_name(name: &str) -> Result<(), McpError> {
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if fine {
        Ok(())
    } else {
        Err(McpError::Spec {
            spec: name.to_owned(),
            reason: format!(
                "a server name is 1 to {MAX_NAME_CHARS} letters, digits, '_', '-' or '.'"
            ),
        })
    }
}

impl FromStr for McpServer {
    type Err = McpError;

    /// `[NAME=]stdio:COMMAND ARGS…` (arguments split like a shell does, with `'…'`, `"…"` and
    /// `\`, but nothing expanded) or `[NAME=]http(s)://…`.
    fn from_str(text: &str) -> Result<Self, McpError> {
        let bad = |reason: &str| McpError::Spec {
            spec: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (name, spec) = match text.split_once('=') {
            Some((name, rest)) if !is_transport(text) => (Some(name), rest),
            _ => (None, text),
        };
        let server = if let Some(command_line) = spec.strip_prefix("stdio:") {
            let mut words = split_words(command_line).map_err(bad)?;
            if words.is_empty() {
                return Err(bad("stdio: needs a command, as in stdio:mcp-server-time"));
            }
            let command = words.remove(0);
            let default_name = command.rsplit('/').next().unwrap_or(&command).to_owned();
            McpServer::stdio(name.map_or(default_name, str::to_owned), command, words)
        } else if is_http(spec) {
            let host = reqwest_mcp::Url::parse(spec)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
                .ok_or_else(|| bad("the URL has no host"))?;
            McpServer::http(name.map_or(host, str::to_owned), spec)
        } else {
            return Err(bad(
                "expected stdio:COMMAND ARGS…, http://… or https://…, optionally after NAME=",
            ));
        };
        server.check().map_err(|e| match e {
            McpError::Spec { reason, .. } => bad(&reason),
            other => other,
        })?;
        Ok(server)
    }
}

fn is_http(spec: &str) -> bool {
    spec.starts_with("http://") || spec.starts_with("https://")
}

fn is_transport(text: &str) -> bool {
    text.starts_with("stdio:") || is_http(text)
}

/// Splits a command line into words like a POSIX shell, without expanding anything: blanks
/// separate words, `'…'` keeps everything, `"…"` keeps everything but `\"` and `\\`, and `\`
/// outside quotes takes the next character as it is.
fn split_words(line: &str) -> Result<Vec<String>, &'static str> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(done) = word.take() {
                    words.push(done);
                }
            }
            '\'' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a ' is not closed"),
                    }
                }
            }
            '"' => {
                let word = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("a \" is not closed"),
                        },
                        Some(c) => word.push(c),
                        None => return Err("a \" is not closed"),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("the command line ends with a lone \\"),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(server: &McpServer) -> (&str, &[String]) {
        match &server.transport {
            McpTransport::Stdio { command, args, .. } => (command.as_str(), args.as_slice()),
            other => panic!("not stdio: {other:?}"),
        }
    }

    #[test]
    fn stdio_specs_split_like_a_shell_without_expanding() {
        let server: McpServer = "stdio:/usr/bin/mcp-server-time --local-timezone 'Europe/Paris'"
            .parse()
            .unwrap();
        assert_eq!(server.name(), "mcp-server-time");
        assert_eq!(
            stdio(&server),
            (
                "/usr/bin/mcp-server-time",
                &["--local-timezone".to_owned(), "Europe/Paris".to_owned()][..]
            )
        );
        let server: McpServer = r#"files=stdio:srv "a \"b\" c" d\ e $HOME ''"#.parse().unwrap();
        assert_eq!(server.name(), "files");
        assert_eq!(
            stdio(&server).1,
            ["a \"b\" c", "d e", "$HOME", ""].map(String::from)
        );
    }

    #[test]
    fn http_specs_are_named_after_their_host_unless_named() {
        let server: McpServer = "http://127.0.0.1:3001/mcp".parse().unwrap();
        assert_eq!(server.name(), "127.0.0.1");
        assert!(server.is_http());
        let server: McpServer = "docs=https://127.0.0.1/mcp?x=1".parse().unwrap();
        assert_eq!(server.name(), "docs");
        // An `=` inside the URL is not a name.
        let server: McpServer = "https://127.0.0.1/mcp?x=1".parse().unwrap();
        assert_eq!(server.name(), "127.0.0.1");
    }

    #[test]
    fn debug_output_never_shows_header_or_variable_values() {
        let server = McpServer::http("docs", "https://127.0.0.1/mcp")
            .with_header("Authorization", "Bearer secret-token-value");
        let shown = format!("{server:?}");
        assert!(
            shown.contains("Authorization") && !shown.contains("secret"),
            "{shown}"
        );
        let server = McpServer::stdio("s", "srv", ["a"]).with_env("TOKEN", "secret-value");
        let shown = format!("{server:?}");
        assert!(
            shown.contains("TOKEN") && !shown.contains("secret"),
            "{shown}"
        );
    }

    #[test]
    fn bad_specs_say_what_is_expected() {
        let error = |text: &str| text.parse::<McpServer>().unwrap_err().to_string();
        assert!(error("mcp-server-time").contains("expected stdio:COMMAND"));
        assert!(error("stdio:").contains("needs a command"));
        assert!(error("stdio:a 'b").contains("not closed"));
        assert!(error("my server=stdio:x").contains("a server name is"));
        assert!(error("ftp://x").contains("expected stdio:COMMAND"));
        let reserved = McpServer::http("h", "http://127.0.0.1/mcp")
            .with_header("Mcp-Session-Id", "x")
            .check()
            .unwrap_err()
            .to_string();
        assert!(reserved.contains("set by the MCP transport"), "{reserved}");
    }
}
