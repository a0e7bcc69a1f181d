//! A stdio server's process: spawned in a process group of its own with a cleared environment,
//! its stdout read in bounded lines, its stderr sent to the log (bounded and rate-limited), and
//! stopped — stdin closed, then SIGTERM, then SIGKILL to the group — and reaped, and what is
//! left of its group after it stopped as well.
//!
//! The process group keeps a terminal's Ctrl-C (sent to the foreground group, which `turnstile
//! chat` turns into an interrupt) away from the servers, and lets a server started through a
//! launcher (`npx`, `uv run`) be stopped with its children.

use std::io;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::RoleClient;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::time::Instant;

use super::spec::INHERITED_ENV;
use super::{MAX_MESSAGE_BYTES, SHUTDOWN_GRACE};

/// The longest stderr line logged, in bytes; the rest of a longer one is left out.
const MAX_STDERR_LINE_BYTES: usize = 1024;

/// Stderr lines logged per second at most: a server's start-up banner and its warnings fit,
/// a server that writes in a loop does not flood the log (the lines past it are counted and the
/// count logged).
const STDERR_LINES_PER_SECOND: u32 = 100;

/// The stdio transport rmcp reads and writes.
pub(super) type StdioTransport =
    AsyncRwTransport<RoleClient, BoundedLines<ChildStdout>, ChildStdin>;

/// A running stdio server's process.
pub(super) struct Process {
    child: Box<dyn ChildWrapper>,
    /// Its process id, which is also its group's (the child forgets it once reaped); cleared
    /// once [`Process::stop`] ends, and the group killed on drop while it is still here.
    pid: Option<u32>,
    /// Why its stdout was cut, once it was (a line over [`MAX_MESSAGE_BYTES`]).
    pub cut: Arc<Mutex<Option<String>>>,
}

impl Process {
    /// Starts `command args…` for the server `name`, with only [`INHERITED_ENV`] and `env` in its
    /// environment.
    pub(super) fn spawn(
        name: &str,
        command: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> io::Result<(Process, StdioTransport)> {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|var| std::env::var_os(var).map(|value| (var.to_string(), value))),
            )
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut wrapped = CommandWrap::from(cmd);
        #[cfg(unix)]
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        wrapped.wrap(KillOnDrop);
        let mut child = wrapped.spawn()?;
        let missing = || io::Error::other("a pipe of the child was not set up");
        let stdin = child.stdin().take().ok_or_else(missing)?;
        let stdout = child.stdout().take().ok_or_else(missing)?;
        if let Some(stderr) = child.stderr().take() {
            tokio::spawn(log_stderr(name.to_owned(), stderr));
        }
        let cut = Arc::new(Mutex::new(None));
        let reader = BoundedLines {
            inner: stdout,
            max: MAX_MESSAGE_BYTES,
            line: 0,
            cut: cut.clone(),
        };
        // rmcp's own bound stays above ours, so that ours is the one that acts.
        let transport = AsyncRwTransport::new_client(reader, stdin)
            .with_max_line_length(MAX_MESSAGE_BYTES.saturating_add(2));
        let pid = child.id();
        Ok((Process { child, pid, cut }, transport))
    }

    /// The process id.
    pub(super) fn id(&self) -> Option<u32> {
        self.pid
    }

    /// Stops the process (its stdin is closed already, when the connection ended): waits
    /// [`SHUTDOWN_GRACE`] for it to exit, sends its group SIGTERM and waits again, then kills
    /// the group; always reaps it. Then whatever is left of its group (a launcher's children, a
    /// helper the server started, which outlive it when they ignore SIGTERM or were never told)
    /// gets SIGTERM, [`SHUTDOWN_GRACE`] and SIGKILL. Returns how the server ended.
    pub(super) async fn stop(mut self) -> io::Result<ExitStatus> {
        let status = self.stop_leader().await;
        #[cfg(unix)]
        if let Some(group) = self.pid {
            stop_group(group).await;
        }
        // Stopped: nothing is left for the drop to kill. (A stop cut short kills the group.)
        self.pid = None;
        status
    }

    /// Completes once the process has exited (it is reaped; [`Process::stop`] then answers its
    /// status at once). Cancel-safe.
    pub(super) async fn exited(&mut self) {
        let _ = self.child.wait().await;
    }

    async fn stop_leader(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.wait_for(SHUTDOWN_GRACE).await? {
            return Ok(status);
        }
        #[cfg(unix)]
        {
            // A group that is gone already answers ESRCH: nothing to do then.
            let _ = self.child.signal(libc::SIGTERM);
            if let Some(status) = self.wait_for(SHUTDOWN_GRACE).await? {
                return Ok(status);
            }
        }
        Box::into_pin(self.child.kill()).await?;
        self.child.wait().await
    }

    async fn wait_for(&mut self, grace: Duration) -> io::Result<Option<ExitStatus>> {
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.map(Some),
            Err(_) => Ok(None),
        }
    }
}

impl Drop for Process {
    /// A process dropped without [`Process::stop`] (its start was cut short, the stop itself
    /// was): its leader is killed (`kill_on_drop`), and so is the rest of its group, at once.
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.pid.take().and_then(|pid| i32::try_from(pid).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// How often a group whose leader is gone is looked at while it is given time to exit: its
/// members are not this process's children, so there is no exit to wait for.
#[cfg(unix)]
const GROUP_LOOK_EVERY: Duration = Duration::from_millis(10);

/// Stops what is left of the process group `group` once its leader is reaped: SIGTERM, up to
/// [`SHUTDOWN_GRACE`] for its members to exit, then SIGKILL. The id is not reused while a
/// member is left, so a signal can only reach the group it names; an id the group no longer
/// holds answers ESRCH, or EPERM where another user's group took it (left alone).
#[cfg(unix)]
async fn stop_group(group: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(group) else {
        return;
    };
    let pgid = Pid::from_raw(raw);
    let left = || {
        // Members that exited after being handed to this process (it runs as PID 1, or as a
        // subreaper) are reaped here, or their zombies would count as left. ECHILD (none of
        // the group is this process's child) ends it at once.
        while let Ok(status) = waitpid(Pid::from_raw(-raw), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        killpg(pgid, None).is_ok()
    };
    if !left() {
        return;
    }
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    while left() && Instant::now() < deadline {
        tokio::time::sleep(GROUP_LOOK_EVERY).await;
    }
    if left() {
        tracing::info!(target: "turnstile::mcp", group,
            "processes of an MCP server's group outlived it and SIGTERM; killing them");
        let _ = killpg(pgid, Signal::SIGKILL);
    }
}

/// Logs a server's stderr line by line at INFO (target `turnstile::mcp`), each cut to
/// [`MAX_STDERR_LINE_BYTES`], at most [`STDERR_LINES_PER_SECOND`] a second.
async fn log_stderr(server: String, stderr: ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut window = Instant::now();
    let mut logged = 0u32;
    let mut left_out = 0u64;
    loop {
        line.clear();
        match read_bounded_line(&mut reader, &mut line, MAX_STDERR_LINE_BYTES).await {
            Ok(false) => break,
            Ok(true) => {}
            Err(error) => {
                tracing::debug!(target: "turnstile::mcp", %server, %error, "stderr unreadable");
                break;
            }
        }
        if window.elapsed() >= Duration::from_secs(1) {
            if left_out > 0 {
                tracing::warn!(target: "turnstile::mcp", %server, left_out,
                    "the MCP server wrote more stderr lines than are logged; these were left out");
            }
            window = Instant::now();
            logged = 0;
            left_out = 0;
        }
        if logged >= STDERR_LINES_PER_SECOND {
            left_out += 1;
            continue;
        }
        logged += 1;
        let text = String::from_utf8_lossy(&line);
        tracing::info!(target: "turnstile::mcp", %server, "stderr: {}", text.trim_end());
    }
    if left_out > 0 {
        tracing::warn!(target: "turnstile::mcp", %server, left_out,
            "the MCP server wrote more stderr lines than are logged; these were left out");
    }
}

/// Reads one line into `line`, keeping at most `max` bytes of it (the rest is read and
/// dropped); `false` at the end of the stream.
async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<bool> {
    let mut read_any = false;
    loop {
        let (used, done) = {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(read_any);
            }
            read_any = true;
            let newline = available.iter().position(|b| *b == b'\n');
            let end = newline.map_or(available.len(), |at| at);
            let room = max.saturating_sub(line.len());
            line.extend_from_slice(&available[..end.min(room)]);
            (
                newline.map_or(available.len(), |at| at + 1),
                newline.is_some(),
            )
        };
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
}

/// A server's stdout that ends in an error once a line passes `max` bytes, so that no message
/// larger than that is ever held: the connection then ends, and the server is restarted.
pub(super) struct BoundedLines<R> {
    inner: R,
    max: usize,
    /// Bytes since the last newline.
    line: usize,
    /// Set to the reason when the stream is cut.
    cut: Arc<Mutex<Option<String>>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(reason) = self.cut.lock().clone() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, reason)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        // `split` yields the end of the line already begun, then each line that starts here;
        // `start` is where the current one starts in this read.
        let read = &buf.filled()[before..];
        let mut line = this.line;
        let mut start = 0;
        let mut over = None;
        for (i, segment) in read.split(|b| *b == b'\n').enumerate() {
            line = if i == 0 {
                line + segment.len()
            } else {
                segment.len()
            };
            if line > this.max {
                over = Some(start);
                break;
            }
            start += segment.len() + 1;
        }
        if let Some(kept) = over {
            // The complete lines before the long one are delivered; the long one never is.
            let error = this.cut_off();
            buf.set_filled(before + kept);
            return Poll::Ready(if kept > 0 { Ok(()) } else { Err(error) });
        }
        this.line = line;
        Poll::Ready(Ok(()))
    }
}

impl<R> BoundedLines<R> {
    fn cut_off(&mut self) -> io::Error {
        let reason = format!(
            "it sent a message over {} bytes (the bound); the message was not read",
            self.max
        );
        *self.cut.lock() = Some(reason.clone());
        io::Error::new(io::ErrorKind::InvalidData, reason)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    fn bounded(input: &'static [u8], max: usize) -> BoundedLines<&'static [u8]> {
        BoundedLines {
            inner: input,
            max,
            line: 0,
            cut: Arc::new(Mutex::new(None)),
        }
    }

    #[tokio::test]
    async fn lines_within_the_bound_pass_unchanged() {
        let mut reader = bounded(b"12345\n1234\n123", 5);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"12345\n1234\n123");
    }

    #[tokio::test]
    async fn a_line_past_the_bound_ends_the_stream_with_the_reason() {
        for input in [&b"ok\n123456\nok\n"[..], b"123456", b"12\n3456789"] {
            let mut reader = bounded(input, 5);
            let mut out = Vec::new();
            let error = reader.read_to_end(&mut out).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
            assert!(error.to_string().contains("over 5 bytes"), "{error}");
            assert!(reader.cut.lock().is_some());
            assert!(reader.read(&mut [0u8; 4]).await.is_err(), "it stays cut");
        }
    }

    #[tokio::test]
    async fn a_line_split_over_reads_is_counted_whole() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let mut reader = BoundedLines {
            inner: rx,
            max: 5,
            line: 0,
            cut: Arc::new(Mutex::new(None)),
        };
        use tokio::io::AsyncWriteExt;
        let mut buffer = [0u8; 16];
        tx.write_all(b"abc").await.unwrap();
        assert_eq!(reader.read(&mut buffer).await.unwrap(), 3);
        tx.write_all(b"de\nab").await.unwrap();
        assert_eq!(reader.read(&mut buffer).await.unwrap(), 5);
        tx.write_all(b"cdef").await.unwrap();
        assert!(reader.read(&mut buffer).await.is_err());
    }

    #[tokio::test]
    async fn stderr_lines_are_cut_to_their_bound() {
        let mut input: &[u8] = b"short\nthis one is long\n\nend";
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while read_bounded_line(&mut input, &mut line, 8).await.unwrap() {
            lines.push(String::from_utf8(std::mem::take(&mut line)).unwrap());
        }
        assert_eq!(lines, ["short", "this one", "", "end"]);
    }
}
