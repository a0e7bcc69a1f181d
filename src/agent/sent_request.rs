//! What an agent sent its model, kept so that an operator can read the exact request of a turn
//! (the messages, the tools, the options) after the fact: recorded by the agent through
//! [`crate::TurnContext::model_request_sent`], kept by the process that ran the turn in a
//! [`SentRequestLog`] bounded in bytes, newest turns first to stay. Each turn's are kept with
//! the id of the event that ends it, so that a reader can check they belong to the turn the
//! store holds at that seq now (a session deleted and made again numbers its events anew).
//!
//! Nothing of it is stored: a request repeats the whole context window, so keeping every turn's
//! would grow a session's log with the square of its length. What is kept is lost on restart
//! and read only from the process that ran the turn.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use uuid::Uuid;

use crate::key::SessionKey;
use crate::state::Seq;

/// The largest request body kept whole; a longer one is kept cut at this many bytes (at a
/// character boundary) and marked [`SentRequest::truncated`].
pub const MAX_SENT_BODY_BYTES: usize = 1 << 20;

/// The most bytes of request bodies one turn keeps: past it, later requests keep their URL and
/// headers with an empty body, marked truncated. A turn of many tool rounds resends its growing
/// context each round; an operator reading it wants the first rounds and the shape of the rest.
pub const MAX_SENT_BYTES_PER_TURN: usize = 4 << 20;

/// What a [`SentRequestLog`] keeps at most by default: 16 MiB of requests across all sessions.
pub const DEFAULT_SENT_REQUEST_BYTES: usize = 16 << 20;

/// One request an agent sent its model, as sent (its retries send the same): secrets are the
/// agent's to take out before recording ([`crate::TurnContext::model_request_sent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRequest {
    /// The turn's request it was (1 for the first, one more per tool round), as in the turn's
    /// timing record ([`crate::state::ModelRequestTiming::round`]).
    pub round: u32,
    /// The HTTP method.
    pub method: String,
    /// The URL, without user info or query.
    pub url: String,
    /// The headers sent, in order, secret values replaced by `[redacted]`.
    pub headers: Vec<(String, String)>,
    /// The body, cut to [`MAX_SENT_BODY_BYTES`].
    pub body: Arc<str>,
    /// The body's length as sent, in bytes.
    pub body_bytes: usize,
    /// Whether `body` is shorter than what was sent.
    pub truncated: bool,
}

impl SentRequest {
    /// The request of round `round`: `method` to `url` with `headers` and `body` (cut to
    /// [`MAX_SENT_BODY_BYTES`] here).
    pub fn new(
        round: u32,
        method: impl Into<String>,
        url: impl Into<String>,
        headers: Vec<(String, String)>,
        body: &str,
    ) -> Self {
        let kept = crate::agent::floor_char_boundary(body, MAX_SENT_BODY_BYTES);
        Self {
            round,
            method: method.into(),
            url: url.into(),
            headers,
            body: Arc::from(&body[..kept]),
            body_bytes: body.len(),
            truncated: kept < body.len(),
        }
    }

    /// The same request with its body left out (past a turn's [`MAX_SENT_BYTES_PER_TURN`]).
    pub(crate) fn without_body(mut self) -> Self {
        self.truncated = self.truncated || !self.body.is_empty();
        self.body = Arc::from("");
        self
    }

    /// Roughly the memory it holds, for the log's budget.
    fn weight(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 48)
            .sum();
        std::mem::size_of::<Self>() + self.method.len() + self.url.len() + headers + self.body.len()
    }
}

/// The requests turns sent their model, by session and the seq of the event that ends the
/// turn, within a budget of bytes: the oldest turns' go first.
#[derive(Debug)]
pub struct SentRequestLog {
    budget: usize,
    kept: Mutex<Kept>,
}

/// A turn's requests, the id of the event that ends it, and their weight in the budget.
type TurnRequests = (Arc<[SentRequest]>, Uuid, usize);

#[derive(Debug, Default)]
struct Kept {
    turns: HashMap<(SessionKey, Seq), TurnRequests>,
    /// Oldest first; an entry whose turn was forgotten is skipped when reached.
    order: VecDeque<(SessionKey, Seq)>,
    bytes: usize,
}

impl SentRequestLog {
    /// A log that keeps at most `budget` bytes of requests; `0` keeps none.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// Keeps the requests of the turn of session `key` that ends at `seq` with the event
    /// `ending`, letting go of the oldest turns' to stay within the budget; a turn heavier than
    /// the whole budget is not kept.
    pub fn keep(&self, key: &SessionKey, seq: Seq, ending: Uuid, requests: Vec<SentRequest>) {
        let weight: usize = requests.iter().map(SentRequest::weight).sum::<usize>() + 64;
        if requests.is_empty() || weight > self.budget {
            return;
        }
        let mut kept = self.kept.lock();
        let id = (key.clone(), seq);
        if let Some((_, _, old)) = kept.turns.remove(&id) {
            // Kept again (rare: a seq is a turn's once): its old place must not evict it.
            kept.bytes -= old;
            kept.order.retain(|place| place != &id);
        }
        while kept.bytes + weight > self.budget {
            let Some(oldest) = kept.order.pop_front() else {
                break;
            };
            if let Some((_, _, old)) = kept.turns.remove(&oldest) {
                kept.bytes -= old;
            }
        }
        kept.bytes += weight;
        kept.turns
            .insert(id.clone(), (requests.into(), ending, weight));
        kept.order.push_back(id);
        // Forgotten turns leave their place in `order` behind; past twice the live ones, drop
        // those places so that `order` stays bounded by what is kept.
        if kept.order.len() > 2 * kept.turns.len() + 16 {
            let Kept { turns, order, .. } = &mut *kept;
            order.retain(|id| turns.contains_key(id));
        }
    }

    /// The requests kept for the turn of session `key` that ended at `seq`, and the id of the
    /// event that ended it.
    pub fn get(&self, key: &SessionKey, seq: Seq) -> Option<(Arc<[SentRequest]>, Uuid)> {
        let kept = self.kept.lock();
        kept.turns
            .get(&(key.clone(), seq))
            .map(|(requests, ending, _)| (requests.clone(), *ending))
    }

    /// Lets go of everything kept for session `key` (it was deleted: its seqs may be used again
    /// by a new session of the same name, and its content must not outlive it).
    pub fn forget(&self, key: &SessionKey) {
        self.forget_where(|session| session == key);
    }

    /// Lets go of everything kept for every session of user `user` (the user was deleted).
    pub fn forget_user(&self, user: &str) {
        self.forget_where(|session| session.user_id() == user);
    }

    fn forget_where(&self, gone: impl Fn(&SessionKey) -> bool) {
        let mut kept = self.kept.lock();
        let Kept {
            turns,
            order,
            bytes,
        } = &mut *kept;
        turns.retain(|(session, _), (_, _, weight)| {
            let ours = gone(session);
            if ours {
                *bytes -= *weight;
            }
            !ours
        });
        order.retain(|(session, _)| !gone(session));
    }

    /// The bytes kept now.
    pub fn bytes(&self) -> usize {
        self.kept.lock().bytes
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }
}

impl Default for SentRequestLog {
    fn default() -> Self {
        Self::new(DEFAULT_SENT_REQUEST_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(session: &str) -> SessionKey {
        SessionKey::new("ada", session).unwrap()
    }

    fn request(round: u32, body: &str) -> SentRequest {
        SentRequest::new(
            round,
            "POST",
            "http://127.0.0.1:1/v1/chat/completions",
            vec![],
            body,
        )
    }

    #[test]
    fn a_long_body_is_cut_at_a_character_boundary_and_marked() {
        let body = "é".repeat(MAX_SENT_BODY_BYTES / 2 + 1);
        let sent = request(1, &body);
        assert!(sent.truncated);
        assert_eq!(sent.body_bytes, body.len());
        assert!(sent.body.len() <= MAX_SENT_BODY_BYTES);
        assert!(body.starts_with(&*sent.body));
        let short = request(1, "{}");
        assert!(!short.truncated);
        assert_eq!(&*short.body, "{}");
    }

    #[test]
    fn the_oldest_turns_go_first_and_the_budget_holds() {
        let one = request(1, &"x".repeat(1000)).weight() + 64;
        let log = SentRequestLog::new(3 * one);
        for seq in 1..=5 {
            log.keep(
                &key("a"),
                seq,
                Uuid::nil(),
                vec![request(1, &"x".repeat(1000))],
            );
            assert!(log.bytes() <= log.budget());
        }
        assert!(log.get(&key("a"), 1).is_none());
        assert!(log.get(&key("a"), 2).is_none());
        for seq in 3..=5 {
            assert_eq!(log.get(&key("a"), seq).unwrap().0[0].round, 1, "turn {seq}");
        }
        // Heavier than the whole budget: not kept, and nothing else is let go for it.
        log.keep(
            &key("a"),
            6,
            Uuid::nil(),
            vec![request(1, &"x".repeat(4 * one))],
        );
        assert!(log.get(&key("a"), 6).is_none());
        assert!(log.get(&key("a"), 3).is_some());
    }

    #[test]
    fn forgetting_a_session_frees_its_bytes_and_keeps_the_others() {
        let log = SentRequestLog::new(1 << 20);
        log.keep(&key("a"), 1, Uuid::nil(), vec![request(1, "{\"a\":1}")]);
        log.keep(&key("b"), 1, Uuid::nil(), vec![request(1, "{\"b\":1}")]);
        let before = log.bytes();
        log.forget(&key("a"));
        assert!(log.get(&key("a"), 1).is_none());
        assert_eq!(&*log.get(&key("b"), 1).unwrap().0[0].body, "{\"b\":1}");
        assert!(log.bytes() < before);
        let bo = SessionKey::new("bo", "x").unwrap();
        log.keep(&bo, 1, Uuid::nil(), vec![request(1, "{}")]);
        log.forget_user("ada");
        assert!(log.get(&key("b"), 1).is_none());
        assert!(log.get(&bo, 1).is_some());
        log.forget_user("bo");
        assert_eq!(log.bytes(), 0);
    }

    #[test]
    fn keeping_a_turn_again_replaces_it_and_places_stay_bounded() {
        let log = SentRequestLog::new(1 << 20);
        for round in 1..=1000 {
            log.keep(&key("a"), 7, Uuid::nil(), vec![request(round, "{}")]);
        }
        assert_eq!(log.get(&key("a"), 7).unwrap().0[0].round, 1000);
        let kept = log.kept.lock();
        assert_eq!(kept.turns.len(), 1);
        assert!(kept.order.len() <= 2 * kept.turns.len() + 17);
    }

    #[test]
    fn a_log_of_no_bytes_keeps_nothing() {
        let log = SentRequestLog::new(0);
        log.keep(&key("a"), 1, Uuid::nil(), vec![request(1, "{}")]);
        assert!(log.get(&key("a"), 1).is_none());
        assert_eq!(log.bytes(), 0);
    }
}
