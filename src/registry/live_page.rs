//! A snapshot of the live sessions, for operators: what each is doing, a bounded page at a
//! time, copied under the registry's lock without awaiting anything there.

use std::time::Duration;

use crate::key::SessionKey;

/// What a live session is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveState {
    /// Its actor is being spawned and is loading the session.
    Starting,
    /// Nothing running, nothing waiting.
    Idle,
    /// One turn running, nothing waiting behind it.
    Running,
    /// One turn running and this many messages waiting behind it.
    Queued(usize),
    /// Asked to stop (passivated, evicted, deleted or shut down): it finishes what it must and
    /// flushes; messages that arrive meanwhile wait for its next activation.
    Stopping,
}

impl LiveState {
    /// A short lowercase name: `starting`, `idle`, `running`, `queued`, `stopping`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Idle => "idle",
            Self::Running => "running",
            Self::Queued(_) => "queued",
            Self::Stopping => "stopping",
        }
    }
}

/// One live session as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveSession {
    /// The session.
    pub key: SessionKey,
    /// What it is doing.
    pub state: LiveState,
    /// Turns it has run, over its whole history (its head's `stats.turns`, as of its last
    /// answered turn).
    pub turns: u64,
    /// Time since it last did something (a turn arrived or was answered, or it was loaded).
    pub idle_for: Duration,
    /// Events of a write on its way to the store, or of one whose outcome is unknown (held apart,
    /// never shown, until read back); 0 normally.
    pub unsaved: usize,
    /// Approximate bytes of its serialised events, as of its last answered turn.
    pub bytes: u64,
}

/// Which live sessions a page holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveQuery {
    /// Only this user's sessions.
    pub user: Option<String>,
    /// Only sessions after this key (the previous page's [`LivePage::next`]).
    pub after: Option<SessionKey>,
    /// At most this many (1..=[`Self::MAX_LIMIT`]; 0 means [`Self::DEFAULT_LIMIT`]).
    pub limit: usize,
}

impl LiveQuery {
    /// Most sessions one [`Runtime::live_page`](crate::Runtime::live_page) returns. A page is
    /// copied under the registry's lock, which every turn takes to be routed: a thousand entries
    /// copy in well under a millisecond (`docs/BENCHMARKS.md`), so routing waits at most that long.
    pub const MAX_LIMIT: usize = 1_000;

    /// Sessions a page holds unless the query says otherwise.
    pub const DEFAULT_LIMIT: usize = 100;
}

/// One page of live sessions, ordered by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LivePage {
    /// The sessions, in key order.
    pub sessions: Vec<LiveSession>,
    /// Pass it as [`LiveQuery::after`] for the next page; `None` after the last one.
    pub next: Option<SessionKey>,
    /// Sessions held by the registry now, whatever the filter.
    pub total: usize,
}
