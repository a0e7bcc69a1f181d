//! Where one connection is between its requests, and the read deadline that follows from it.
//!
//! A connection is *idle* (waiting for a request, no byte of it yet), reading a *head* (some of
//! a request's header block has arrived), or *serving* (a request's head is complete and its
//! response is not yet fully written). Idle and head reads have deadlines; serving has none here
//! (a request body has its own deadline, and a streamed reply may rightly pause for minutes).
//!
//! Two timeouts rather than one because they guard different things: the idle one bounds
//! keep-alive connections and must outlast a load balancer's own idle timeout, while the head
//! one bounds a client that sends half a header block and can be much shorter.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The read deadlines of a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    /// How long a connection may wait for the first byte of a request.
    pub idle: Duration,
    /// How long a request's whole header block may take from its first byte.
    pub head: Duration,
}

/// The phase of one connection, shared by its reader (which sees bytes arrive) and its service
/// (which sees requests start and responses end). Both run in the connection's one task, so
/// the lock is never contended.
#[derive(Debug)]
pub(crate) struct Phase {
    state: Mutex<State>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a request since this instant.
    Idle(Instant),
    /// A request's head started arriving at this instant.
    Head(Instant),
    /// This many requests have a complete head and an unfinished response.
    Serving(usize),
}

/// Which deadline a connection missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missed {
    /// No request came within the idle timeout.
    Idle,
    /// A request's header block did not complete within the head timeout.
    Head,
}

impl Missed {
    /// The label of the closing reason in metrics.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Idle => "idle_timeout",
            Self::Head => "header_timeout",
        }
    }
}

impl Phase {
    /// A connection accepted at `now`: idle.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            state: Mutex::new(State::Idle(now)),
        }
    }

    /// Bytes were read at `now`: an idle connection starts reading a head.
    pub(crate) fn bytes_arrived(&self, now: Instant) {
        let mut state = self.state.lock();
        if let State::Idle(_) = *state {
            *state = State::Head(now);
        }
    }

    /// A request's head is complete and its handling begins.
    pub(crate) fn request_started(&self) {
        let mut state = self.state.lock();
        *state = match *state {
            State::Serving(n) => State::Serving(n + 1),
            State::Idle(_) | State::Head(_) => State::Serving(1),
        };
    }

    /// A response was written out (or abandoned) at `now`; with none left, the connection is
    /// idle from then on.
    pub(crate) fn response_finished(&self, now: Instant) {
        let mut state = self.state.lock();
        if let State::Serving(n) = *state {
            *state = if n > 1 {
                State::Serving(n - 1)
            } else {
                State::Idle(now)
            };
        }
    }

    /// The instant the connection must have made progress by, and what missing it means; none
    /// while a request is being served.
    pub(crate) fn deadline(&self, limits: ReadLimits) -> Option<(Instant, Missed)> {
        match *self.state.lock() {
            State::Idle(since) => Some((since + limits.idle, Missed::Idle)),
            State::Head(since) => Some((since + limits.head, Missed::Head)),
            State::Serving(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ReadLimits = ReadLimits {
        idle: Duration::from_secs(60),
        head: Duration::from_secs(5),
    };

    #[test]
    fn a_new_connection_has_the_idle_deadline() {
        let t0 = Instant::now();
        let phase = Phase::new(t0);
        assert_eq!(
            phase.deadline(LIMITS),
            Some((t0 + LIMITS.idle, Missed::Idle))
        );
    }

    #[test]
    fn the_first_byte_of_a_request_starts_the_head_deadline_once() {
        let t0 = Instant::now();
        let phase = Phase::new(t0);
        let first = t0 + Duration::from_secs(30);
        phase.bytes_arrived(first);
        // Later bytes of the same head do not push the deadline back.
        phase.bytes_arrived(first + Duration::from_secs(4));
        assert_eq!(
            phase.deadline(LIMITS),
            Some((first + LIMITS.head, Missed::Head))
        );
    }

    #[test]
    fn serving_has_no_deadline_until_every_response_is_written() {
        let t0 = Instant::now();
        let phase = Phase::new(t0);
        phase.bytes_arrived(t0);
        phase.request_started();
        phase.request_started();
        // Body bytes while serving start nothing.
        phase.bytes_arrived(t0);
        assert_eq!(phase.deadline(LIMITS), None);
        phase.response_finished(t0);
        assert_eq!(phase.deadline(LIMITS), None);
        let done = t0 + Duration::from_secs(90);
        phase.response_finished(done);
        assert_eq!(
            phase.deadline(LIMITS),
            Some((done + LIMITS.idle, Missed::Idle))
        );
    }

    #[test]
    fn a_stray_finish_does_not_wake_an_idle_connection() {
        let t0 = Instant::now();
        let phase = Phase::new(t0);
        phase.response_finished(t0 + Duration::from_secs(10));
        assert_eq!(
            phase.deadline(LIMITS),
            Some((t0 + LIMITS.idle, Missed::Idle))
        );
    }
}
