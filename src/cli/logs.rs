//! Where and how the binary logs: stderr, filtered by `RUST_LOG`, as plain one-line records or
//! as JSON lines (`--log-format`).
//!
//! A record is one line whatever its fields hold: a model server's error may carry line breaks
//! or escape sequences, and a log collector splits records by line. Plain records are coloured
//! only on a terminal.

use std::io::{IsTerminal, Write};
use std::str::FromStr;
use std::sync::OnceLock;

use tracing_subscriber::fmt::MakeWriter;

/// The default filter: warnings, ractor's own spans muted, and what MCP servers say (their
/// stderr, their starts and stops: `turnstile::mcp` at INFO).
const DEFAULT_FILTER: &str = "warn,ractor=warn,turnstile::mcp=info";

/// How records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `TIME LEVEL target: message fields`, one line per record.
    Plain,
    /// One JSON object per line (`timestamp`, `level`, `fields`, `target`, `span`…).
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "plain" => Ok(Self::Plain),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format {other:?}; expected plain or json"
            )),
        }
    }
}

/// The target of what the binary tells its operator besides its log records (see [`say`]):
/// never filtered out.
const SAID: &str = "turnstile::said";

/// The format chosen at start-up.
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// How important a line [`say`] writes is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// How things went (`drained, exiting`).
    Info,
    /// Something the operator should look at.
    Warn,
    /// Why the program stops.
    Error,
}

/// Writes a line for the operator on stderr, whatever `RUST_LOG` says: as it is in the plain
/// format (control characters shown as text, see `visible`); in the JSON format as a record like every other (target `turnstile::said`), so that
/// every line of stderr parses as JSON.
pub fn say(level: Said, line: &str) {
    if FORMAT.get() != Some(&LogFormat::Json) {
        // An error may quote a peer (a server's message): its control characters are shown.
        let mut stderr = super::visible::Visible::new(std::io::stderr().lock());
        let _ = writeln!(stderr, "{line}");
        return;
    }
    match level {
        Said::Info => tracing::info!(target: SAID, "{line}"),
        Said::Warn => tracing::warn!(target: SAID, "{line}"),
        Said::Error => tracing::error!(target: SAID, "{line}"),
    }
}

/// Logs to stderr in `format`, filtered by `RUST_LOG`.
pub fn init_tracing(format: LogFormat) {
    let _ = FORMAT.set(format);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER))
        .add_directive(
            format!("{SAID}=info")
                .parse()
                .expect("a valid filter directive"),
        );
    let terminal = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(OneLine { terminal });
    let _ = match format {
        LogFormat::Plain => builder.with_ansi(terminal).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}

/// Writes each record to stderr on one line: line breaks inside it (and, off a terminal,
/// every other control character) are written as escapes. The formatter hands over a whole
/// record per write, ending in its newline.
#[derive(Debug, Clone, Copy)]
struct OneLine {
    /// Colours are escape sequences the formatter writes itself; they are kept on a terminal.
    terminal: bool,
}

impl<'a> MakeWriter<'a> for OneLine {
    type Writer = OneLine;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl Write for OneLine {
    fn write(&mut self, record: &[u8]) -> std::io::Result<usize> {
        let line = one_line(record, self.terminal);
        std::io::stderr().lock().write_all(&line)?;
        Ok(record.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `record` with its inner line breaks (and, unless `keep_escapes`, other control characters
/// but tabs) written as `\n`, `\r`, `\u{…}`; a final newline stays.
fn one_line(record: &[u8], keep_escapes: bool) -> Vec<u8> {
    let (body, end) = match record.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (record, &b""[..]),
    };
    let mut out = Vec::with_capacity(record.len());
    for &byte in body {
        match byte {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.push(byte),
            0x1b if keep_escapes => out.push(byte),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{{{byte:x}}}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.extend_from_slice(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_stays_on_one_line() {
        let record = b"WARN failed: upstream said\nline two\r\n\x1b[31mred\x1b[0m\n";
        assert_eq!(
            String::from_utf8(one_line(record, false)).unwrap(),
            "WARN failed: upstream said\\nline two\\r\\n\\u{1b}[31mred\\u{1b}[0m\n"
        );
        let coloured = b"\x1b[33mWARN\x1b[0m a\nb\n";
        assert_eq!(
            String::from_utf8(one_line(coloured, true)).unwrap(),
            "\x1b[33mWARN\x1b[0m a\\nb\n"
        );
    }

    #[test]
    fn formats_parse_or_say_what_is_expected() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert!("xml"
            .parse::<LogFormat>()
            .unwrap_err()
            .contains("plain or json"));
    }
}
