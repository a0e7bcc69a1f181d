//! Sending a replicated append or check again after an answer that says nothing ran: which
//! answers those are, and how many resends (and waits) one append gets.

use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Times at most an append or a replica check is sent again after an answer that says nothing
/// ran ([`NotRun`]), within the store's response timeout in all: a failover is a redirection
/// or two and a short wait, and a node that keeps answering so must not hold a turn longer.
const MAX_RESENDS: u32 = 6;

/// The first wait before sending again after a [`NotRun::Busy`]; each next one doubles, up to
/// [`MAX_BUSY_WAIT`] (the cluster connection's own retries wait 20 to 500 ms alike).
const FIRST_BUSY_WAIT: Duration = Duration::from_millis(20);
const MAX_BUSY_WAIT: Duration = Duration::from_millis(500);

/// An answer that says the node did not run what it was sent, so that sending it again runs it
/// once at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NotRun {
    /// `MOVED slot host:port`: the slot is another master's now (a failover or a resharding);
    /// the address it names, when the reply has one.
    Moved(Option<String>),
    /// `READONLY`: the node is a replica now (a failover demoted it); the map is asked again.
    Demoted,
    /// `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`: the cluster or the node is busy
    /// with a failover or a restart for a moment; it is waited for.
    Busy,
}

/// Whether `error` says nothing ran, and why. (An `ASK`, met only while a slot migrates, is not
/// followed: the append fails as unavailable and is sent again later.)
pub(super) fn not_run(error: &RedisError) -> Option<NotRun> {
    let ErrorKind::Server(kind) = error.kind() else {
        return None;
    };
    match kind {
        ServerErrorKind::Moved => Some(NotRun::Moved(
            error.redirect_node().map(|(address, _)| address.to_owned()),
        )),
        ServerErrorKind::ReadOnly => Some(NotRun::Demoted),
        ServerErrorKind::TryAgain
        | ServerErrorKind::ClusterDown
        | ServerErrorKind::MasterDown
        | ServerErrorKind::BusyLoading => Some(NotRun::Busy),
        _ => None,
    }
}

/// The resends left to one append or check: a count and a time budget.
pub(super) struct Resends {
    pub(super) sent: u32,
    until: tokio::time::Instant,
}

impl Resends {
    pub(super) fn new(budget: Duration) -> Self {
        Self {
            sent: 0,
            until: tokio::time::Instant::now() + budget,
        }
    }

    /// Takes one resend, with the wait before it should a busy node be the reason; `None` when
    /// they are used up (the count, or the time).
    pub(super) fn next(&mut self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        if self.sent >= MAX_RESENDS || now >= self.until {
            return None;
        }
        let wait = FIRST_BUSY_WAIT
            .saturating_mul(1 << self.sent.min(8))
            .min(MAX_BUSY_WAIT)
            .min(self.until - now);
        self.sent += 1;
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    /// The error of a server's `-text` reply, as the connection reads it.
    fn server_error(text: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(Value::ServerError(e)) => RedisError::from(e),
            other => panic!("{text} read as {other:?}"),
        }
    }

    #[test]
    fn answers_that_say_nothing_ran_are_told_apart() {
        let cases = [
            (
                "MOVED 3999 127.0.0.1:6381",
                Some(NotRun::Moved(Some("127.0.0.1:6381".into()))),
            ),
            (
                "READONLY You can't write against a read only replica.",
                Some(NotRun::Demoted),
            ),
            (
                "TRYAGAIN Multiple keys request during rehashing of slot",
                Some(NotRun::Busy),
            ),
            ("CLUSTERDOWN The cluster is down", Some(NotRun::Busy)),
            ("MASTERDOWN Link with MASTER is down", Some(NotRun::Busy)),
            (
                "LOADING Redis is loading the dataset in memory",
                Some(NotRun::Busy),
            ),
            ("ASK 3999 127.0.0.1:6381", None),
            ("ERR unknown command", None),
            ("NOSCRIPT No matching script", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(not_run(&server_error(reply)), expected, "{reply}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn resends_are_bounded_by_count_and_by_time() {
        let mut resends = Resends::new(Duration::from_secs(60));
        let waits: Vec<Duration> = std::iter::from_fn(|| resends.next()).collect();
        assert_eq!(waits.len(), MAX_RESENDS as usize);
        assert_eq!(waits[0], FIRST_BUSY_WAIT);
        assert!(waits.iter().all(|w| *w <= MAX_BUSY_WAIT));
        let mut resends = Resends::new(Duration::from_millis(100));
        assert!(resends.next().is_some());
        tokio::time::advance(Duration::from_millis(90)).await;
        assert_eq!(
            resends.next(),
            Some(Duration::from_millis(10)),
            "the wait fits the budget"
        );
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(resends.next(), None);
    }
}
