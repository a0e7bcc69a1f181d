//! The read side of sessions: their stored history a page at a time, a turn by the seq of its
//! last event, and a message by its request id. Read from the store — what it acknowledged —
//! so any process sharing the store answers them; the rules of what a turn is are
//! [`crate::state::turn_ending_at`] and [`crate::state::answer_to`], applied here to the events
//! read.

use super::Runtime;
use crate::config::MAX_PRECEDING_ENTRIES;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::state::{
    answer_to, carries_request, find_request, turn_ending_at, Answer, Event, Fate, NotATurn,
    RequestRead, Seq, Turn,
};

/// Events read from the store at a time while looking for a message or a turn's end.
const READ_CHUNK: usize = 200;

/// How far back from a session's newest event a request id is looked for, and how far past its
/// message its answer: a message older than this is not found (rather than reading a long log
/// whole for one lookup).
pub const MAX_REQUEST_SCAN: Seq = 20_000;

/// Events read back at most from a message for the entries it brought: every entry of its turn
/// (its own, and a merged turn's other messages' with theirs), within their bound.
const BROUGHT_LOOKBACK: usize = 2 * MAX_PRECEDING_ENTRIES + 64;

/// Events read back from a turn's end to find its start at first: most turns are a few events.
const TURN_FIRST_LOOK: usize = 32;

/// Largest page the runtime's reads hand out — events of a history ([`Runtime::events`]),
/// sessions of a listing ([`Runtime::list`]) — the stores' own page, so that no read holds an
/// unbounded result in memory.
pub const MAX_PAGE: usize = crate::store::MAX_PAGE;

/// Events read back at most for one turn: a turn with more events (hundreds of tool calls) is
/// read with its last calls only, and no messages.
pub const MAX_TURN_EVENTS: usize = MAX_PAGE;

impl Runtime {
    /// Up to `limit` events of the session's stored history from `from` on, oldest first: what
    /// the store acknowledged (a live session's turn in flight is not there yet). Empty past the
    /// end, or for a session that does not exist.
    pub async fn events(&self, key: &SessionKey, from: Seq, limit: usize) -> Result<Vec<Event>> {
        self.store()
            .read_events(key, from, limit)
            .await
            .map_err(|err| Error::store(key, err))
    }

    /// The seq of the session's newest stored event; `None` when the session does not exist.
    pub async fn last_seq(&self, key: &SessionKey) -> Result<Option<Seq>> {
        let head = self
            .store()
            .load(key, 0)
            .await
            .map_err(|err| Error::store(key, err))?;
        Ok(head.record.map(|record| record.next_seq.saturating_sub(1)))
    }

    /// The turn whose last event is `seq` (the `seq` its callers were answered with), read from
    /// the store; `Err(NotATurn)` inside when no turn ends there. A turn with more than
    /// [`MAX_TURN_EVENTS`] events is read with its last ones only (see [`Turn::inputs`]).
    pub async fn turn(
        &self,
        key: &SessionKey,
        seq: Seq,
    ) -> Result<std::result::Result<Turn, NotATurn>> {
        // A short read finds most turns whole; a longer one only when it did not reach the start.
        for look in [TURN_FIRST_LOOK, MAX_TURN_EVENTS] {
            let from = seq.saturating_sub(look as Seq - 1).max(1);
            let events = self.events(key, from, look).await?;
            let turn = turn_ending_at(&events, seq);
            let whole = from == 1 || look == MAX_TURN_EVENTS;
            if whole || turn.as_ref().map_or(true, |t| !t.inputs.is_empty()) {
                return Ok(turn);
            }
        }
        unreachable!("the last look is always taken")
    }

    /// The requests the agent sent its model in the turn of session `key` that ends at `seq`,
    /// in the order sent, as this process kept them ([`crate::TurnContext::model_request_sent`]):
    /// in memory, within [`crate::RuntimeBuilder::keep_sent_requests`]'s budget, the oldest
    /// turns' let go first. They are answered only while the store still holds that turn's
    /// ending event at `seq` (one read): a session deleted and made again, on any process,
    /// numbers new events from 1. `None` when this process has none for the turn: another
    /// process ran it, they were let go, the process restarted since, or its agent recorded none.
    pub async fn sent_requests(
        &self,
        key: &SessionKey,
        seq: Seq,
    ) -> Result<Option<std::sync::Arc<[crate::agent::SentRequest]>>> {
        let Some((requests, ending)) = self.registry().deps.sent_requests.get(key, seq) else {
            return Ok(None);
        };
        let stored = self.events(key, seq, 1).await?;
        let same = stored.first().is_some_and(|event| event.id == ending);
        Ok(same.then_some(requests))
    }

    /// The message that came with request id `id`, the entries that came with it, and what
    /// became of it, read from the store: looked for among the newest [`MAX_REQUEST_SCAN`]
    /// events. `None` when the session does not exist or holds no such message there. A message
    /// still waiting or running in a live session is not stored yet: not found.
    pub async fn find_request(&self, key: &SessionKey, id: &str) -> Result<Option<RequestRead>> {
        let Some(last) = self.last_seq(key).await? else {
            return Ok(None);
        };
        let Some(mut events) = self.request_chunk(key, id, last).await? else {
            return Ok(None);
        };
        // The entries that came with it lie before it, among the entries and messages of its
        // turn (all of which carry request ids): read back until an event carries none.
        let mut came: Vec<Event> = Vec::new();
        let mut scanned = 0;
        loop {
            let first = events.first().map_or(1, |e| e.seq);
            while let Some(event) = events.pop() {
                scanned += 1;
                let ours = carries_request(&event, id);
                if !came.is_empty() && event.request_id.is_none() {
                    events.clear();
                    scanned = usize::MAX;
                    break;
                }
                if came.is_empty() || ours {
                    came.push(event);
                }
            }
            if first <= 1 || scanned >= BROUGHT_LOOKBACK {
                break;
            }
            let from = first.saturating_sub(READ_CHUNK as Seq).max(1);
            events = self.events(key, from, (first - from) as usize).await?;
        }
        came.reverse();
        let fate = self.fate_of(key, &came).await?;
        Ok(Some(RequestRead { events: came, fate }))
    }

    /// The chunk of the log that holds the message carrying `id`, up to it (it is the last),
    /// from the newest event back.
    async fn request_chunk(
        &self,
        key: &SessionKey,
        id: &str,
        last: Seq,
    ) -> Result<Option<Vec<Event>>> {
        let mut end = last;
        while end > 0 && last - end < MAX_REQUEST_SCAN {
            let from = end.saturating_sub(READ_CHUNK as Seq - 1).max(1);
            let mut events = self.events(key, from, (end - from + 1) as usize).await?;
            if let Some(at) = find_request(&events, id) {
                events.truncate(at + 1);
                return Ok(Some(events));
            }
            end = from - 1;
        }
        Ok(None)
    }

    /// What answered the message at the end of `came`, reading forward from it.
    async fn fate_of(&self, key: &SessionKey, came: &[Event]) -> Result<Fate> {
        let message = came.last().expect("the message itself");
        let mut events = vec![message.clone()];
        let mut next = message.seq + 1;
        loop {
            match answer_to(&events, 0) {
                Answer::Superseded => return Ok(Fate::Superseded),
                Answer::NoTurn => return Ok(Fate::Unanswered),
                Answer::Turn { end, merged } => {
                    let end = end.seq;
                    // A merged message's turn began before it: read the turn whole.
                    let turn = match message_is_merged(message) {
                        true => self.turn(key, end).await?,
                        false => turn_ending_at(&events, end),
                    };
                    let turn = turn.map_err(|why| {
                        Error::InvalidRequest(format!("turn {end} of {key}: {why}"))
                    })?;
                    return Ok(Fate::Answered {
                        turn: Box::new(turn),
                        merged,
                    });
                }
                Answer::Unread if next - message.seq >= MAX_REQUEST_SCAN => {
                    return Ok(Fate::Unanswered)
                }
                Answer::Unread => {}
            }
            let more = self.events(key, next, READ_CHUNK).await?;
            let Some(newest) = more.last() else {
                return Ok(Fate::Unanswered);
            };
            next = newest.seq + 1;
            events.extend(more);
        }
    }
}

fn message_is_merged(event: &Event) -> bool {
    matches!(
        event.kind,
        crate::state::EventKind::UserInput {
            disposition: crate::state::InputDisposition::Merged,
            ..
        }
    )
}
