//! The connection's socket, read under the deadline its [`Phase`] gives, and the response body
//! that tells the phase when a response has been written out.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::phase::{Missed, Phase, ReadLimits};

/// A socket whose reads fail with `TimedOut` once the connection's phase deadline passes, and
/// whose writes fail so once one has made no progress for the idle timeout (a client that reads
/// nothing of its answer); either makes hyper close the connection.
pub(crate) struct DeadlineIo<T> {
    io: T,
    phase: Arc<Phase>,
    limits: ReadLimits,
    /// Armed for `armed_for`; reset when the phase's deadline moves.
    sleep: Pin<Box<Sleep>>,
    armed_for: Option<Instant>,
    /// Armed while a write waits for the peer to read; `None` once a write went through.
    write_sleep: Pin<Box<Sleep>>,
    write_stalled: bool,
}

impl<T> DeadlineIo<T> {
    pub(crate) fn new(io: T, phase: Arc<Phase>, limits: ReadLimits) -> Self {
        Self {
            io,
            phase,
            limits,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed_for: None,
            write_sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            write_stalled: false,
        }
    }

    /// A write's result, failed with `TimedOut` when the peer has read nothing for the idle
    /// timeout.
    fn write_progress<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.write_stalled = false;
            return polled;
        }
        if !self.write_stalled {
            self.write_stalled = true;
            self.write_sleep
                .as_mut()
                .reset(Instant::now() + self.limits.idle);
        }
        match self.write_sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                closing("write_stalled");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "write_stalled",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// `Ready` with the missed deadline once the phase's current deadline has passed.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<Missed> {
        let Some((deadline, missed)) = self.phase.deadline(self.limits) else {
            return Poll::Pending;
        };
        if self.armed_for != Some(deadline) {
            self.sleep.as_mut().reset(deadline);
            self.armed_for = Some(deadline);
        }
        self.sleep.as_mut().poll(cx).map(|()| missed)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for DeadlineIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.phase.bytes_arrived(Instant::now());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.poll_deadline(cx) {
                Poll::Ready(missed) => {
                    closing(missed.label());
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, missed.label())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for DeadlineIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.write_progress(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.write_progress(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Counts and logs a connection closed for missing a deadline.
fn closing(reason: &'static str) {
    tracing::debug!(reason, "closing a connection");
    metrics::counter!("turnstile_http_connections_closed_total", "reason" => reason).increment(1);
}

/// Marks a request as being served from creation until drop: hyper drops a response body once
/// it is written out (or the connection ends), and a handler dropped early drops it unbuilt.
pub(crate) struct Serving(Arc<Phase>);

impl Serving {
    pub(crate) fn start(phase: Arc<Phase>) -> Self {
        phase.request_started();
        Self(phase)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.response_finished(Instant::now());
    }
}

/// A response body that holds its request's [`Serving`] mark until it is dropped.
pub(crate) struct MarkedBody {
    body: Body,
    _serving: Serving,
}

impl MarkedBody {
    pub(crate) fn new(body: Body, serving: Serving) -> Self {
        Self {
            body,
            _serving: serving,
        }
    }
}

impl hyper::body::Body for MarkedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
