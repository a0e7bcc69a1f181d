//! Answers from the log: the outcome each message of a finished turn gets, and idempotent
//! messages — a message whose request id the session already accepted is answered with
//! that message's outcome, and never runs or is stored again.
//!
//! The session looks in two places: the messages in flight (running or waiting), whose answer a
//! retry shares, and the log's newest acknowledged events (its context window, loaded again on
//! activation), where each user input keeps its request id. Nothing the store did not
//! acknowledge is looked at: a write whose outcome was unknown is read back first (the session
//! settles its journal before it looks at a message), and a session that lost its lease answers
//! nothing from its window.

use std::collections::HashMap;

use super::Live;
use crate::agent::FailureKind;
use crate::call::{split_request_id, Outcome, OutcomeKind};
use crate::error::Error;
use crate::key::SessionKey;
use crate::session::TurnRequest;
use crate::state::{answer_to, find_request, Answer, Event, EventKind, OutputStatus, Seq};

/// Request ids of the messages running or waiting in a session, and the retries attached to
/// them.
#[derive(Default)]
pub(crate) struct InFlight {
    /// Each request id in flight, with the fingerprint its message came with.
    ids: HashMap<String, Option<String>>,
    retries: HashMap<String, Vec<TurnRequest>>,
}

/// Whether two messages with one request id say different things: both came with a
/// fingerprint, and the fingerprints differ.
fn mismatched(first: Option<&str>, retry: Option<&str>) -> bool {
    matches!((first, retry), (Some(a), Some(b)) if a != b)
}

impl Live {
    /// Answers `request` if its id was seen before (from the log, or later with the answer of
    /// the message in flight); returns it when it is a new message to admit.
    pub(crate) async fn replay(&mut self, request: TurnRequest) -> Option<TurnRequest> {
        let Some(id) = request.request_id.clone() else {
            return Some(request);
        };
        if !self.journal.may_write() {
            // Another process may own the session now: nothing here is vouched for. Not
            // `answer`: a message in flight with this id is that one's to answer.
            let refused = self.journal.not_owner();
            self.send_answer(request, Err(refused));
            return None;
        }
        let mismatch = || Error::RequestMismatch {
            key: self.key.clone(),
            request_id: id.clone(),
        };
        let requests = self.requests.get_or_insert_with(Box::default);
        if let Some(first) = requests.ids.get(&id) {
            if mismatched(first.as_deref(), request.fingerprint.as_deref()) {
                let refused = mismatch();
                self.send_answer(request, Err(refused));
                return None;
            }
            requests.retries.entry(id).or_default().push(request);
            return None;
        }
        let events = self.journal.window().events();
        if find_answer(events, &id).is_none() {
            requests.ids.insert(id, request.fingerprint.clone());
            return Some(request);
        }
        let stored = find_request(events, &id)
            .and_then(|at| events[at].request_id.as_deref())
            .and_then(|stored| split_request_id(stored).1);
        if mismatched(stored, request.fingerprint.as_deref()) {
            let refused = mismatch();
            self.send_answer(request, Err(refused));
            return None;
        }
        let answer = self.stored_answer(&id).await;
        self.answer(request, answer.expect("found in the window just now"));
        None
    }

    /// The answer of the message with request id `id` from the stored log (the window holds
    /// only what the store acknowledged), or `None` when it is not there.
    pub(super) async fn stored_answer(&mut self, id: &str) -> Option<Result<Outcome, Error>> {
        let (_, found) = find_answer(self.journal.window().events(), id)?;
        // The first answer may have been `NotReplicated` (or lost): a stored turn is acknowledged
        // only once the replicas the store waits for hold it. One this session saw acknowledged
        // in full needs no check.
        let answer = if self.journal.acknowledged_in_full(found.seq()) {
            found.into_answer(&self.key)
        } else {
            let store = self.deps.store.clone();
            let version = self.journal.record().version;
            match store.confirm_replicated(&self.key, version).await {
                Ok(()) => found.into_answer(&self.key),
                Err(error) => Err(Error::store(&self.key, error)),
            }
        };
        if !matches!(answer, Err(Error::Store { .. })) {
            metrics::counter!("turnstile_replayed_total").increment(1);
        }
        Some(answer)
    }

    /// A message with `request_id` is being answered: it is no longer in flight, and the
    /// retries attached to it are handed back to get the same answer.
    pub(super) fn answer_retries(&mut self, request_id: &str) -> Vec<TurnRequest> {
        let Some(requests) = self.requests.as_mut() else {
            return Vec::new();
        };
        requests.ids.remove(request_id);
        let retries = requests.retries.remove(request_id).unwrap_or_default();
        if requests.ids.is_empty() && requests.retries.is_empty() {
            self.requests = None;
        }
        if !retries.is_empty() {
            metrics::counter!("turnstile_replayed_total").increment(retries.len() as u64);
        }
        retries
    }
}

/// What the log says a message was answered: an outcome, or the failure of its turn.
#[derive(Debug)]
pub(super) enum Found {
    Outcome(Outcome),
    /// The turn failed (a `turn_failed` event at `seq`): a retry gets the same failure.
    Failed {
        seq: Seq,
        kind: FailureKind,
        reason: String,
    },
}

impl Found {
    /// The seq of the event that answers the message.
    pub(super) fn seq(&self) -> Seq {
        match self {
            Found::Outcome(outcome) => outcome.seq,
            Found::Failed { seq, .. } => *seq,
        }
    }

    /// The answer a retry gets: the outcome, or `AgentFailed` as the first caller got it (but
    /// for the upstream's `Retry-After`, which is not stored: the same request id would only
    /// get this answer again).
    pub(super) fn into_answer(self, key: &SessionKey) -> Result<Outcome, Error> {
        match self {
            Found::Outcome(outcome) => Ok(outcome),
            Found::Failed { kind, reason, .. } => Err(Error::AgentFailed {
                key: key.clone(),
                message: reason,
                kind,
                retry_after: None,
            }),
        }
    }
}

/// The outcome of the message with request id `id` among `events`: its input's seq, and the
/// answer its caller got (or would have got). `None` when it is not there, or not answered yet.
pub(super) fn find_answer(events: &[Event], id: &str) -> Option<(Seq, Found)> {
    let at = find_request(events, id)?;
    let input = events[at].seq;
    let (end, merged) = match answer_to(events, at) {
        Answer::Superseded => {
            let outcome = Outcome {
                kind: OutcomeKind::Superseded,
                output: String::new(),
                seq: input,
                usage: None,
                calls: Vec::new(),
            };
            return Some((input, Found::Outcome(outcome)));
        }
        Answer::Turn { end, merged } => (end, merged),
        Answer::NoTurn | Answer::Unread => return None,
    };
    let found = match &end.kind {
        EventKind::TurnFailed { code, reason, .. } => Found::Failed {
            seq: end.seq,
            kind: FailureKind::from_code(code),
            reason: reason.clone(),
        },
        EventKind::AgentOutput {
            text,
            status,
            usage,
            ..
        } => Found::Outcome(Outcome {
            kind: outcome_kind(*status, merged),
            output: text.clone(),
            seq: end.seq,
            usage: *usage,
            calls: calls_of(events, end.seq),
        }),
        _ => return None,
    };
    Some((input, found))
}

/// The tool calls of the turn that ends at `seq` among `events` (none when it is not there).
fn calls_of(events: &[Event], seq: Seq) -> Vec<crate::state::ToolCallRead> {
    crate::state::turn_ending_at(events, seq).map_or_else(|_| Vec::new(), |turn| turn.calls)
}

/// How a message answered by a turn that ended with `status` was answered: of a merged turn's
/// messages, only the last gets the turn's own outcome.
pub(crate) fn outcome_kind(status: OutputStatus, merged: bool) -> OutcomeKind {
    match (merged, status) {
        (true, _) => OutcomeKind::Merged,
        (false, OutputStatus::Final) => OutcomeKind::Completed,
        (false, OutputStatus::Interrupted(reason)) => OutcomeKind::Interrupted(reason),
        (false, OutputStatus::Incomplete(reason)) => OutcomeKind::Incomplete(reason),
        (false, OutputStatus::Refused) => OutcomeKind::Refused,
    }
}

/// The answer for each message of a turn: the last message gets the turn's outcome, earlier
/// (merged) ones `Merged` with the same output.
pub(super) fn answers_for(
    n: usize,
    events: &[Event],
    failure: Option<Error>,
) -> Vec<Result<Outcome, Error>> {
    if let Some(err) = failure {
        return (0..n).map(|_| Err(err.clone())).collect();
    }
    let output = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::AgentOutput {
            text,
            status,
            usage,
            ..
        } => Some((e.seq, text, *status, *usage)),
        _ => None,
    });
    let Some((seq, text, status, usage)) = output else {
        return Vec::new();
    };
    let calls = calls_of(events, seq);
    (0..n)
        .map(|i| {
            Ok(Outcome {
                kind: outcome_kind(status, i + 1 < n),
                output: text.clone(),
                seq,
                usage,
                calls: calls.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, InputDisposition, InterruptReason};

    fn input(seq: Seq, id: &str, disposition: InputDisposition) -> Event {
        let mut event = Event::new(
            seq,
            Author::User,
            0,
            EventKind::UserInput {
                text: format!("in {seq}"),
                disposition,
            },
        );
        event.request_id = Some(id.to_owned());
        event
    }

    fn output(seq: Seq, status: OutputStatus) -> Event {
        Event::new(
            seq,
            Author::Agent,
            0,
            EventKind::AgentOutput {
                text: format!("out {seq}"),
                status,
                duration_ms: 0,
                usage: None,
            },
        )
    }

    #[test]
    fn each_disposition_is_answered_as_it_was_the_first_time() {
        let events = vec![
            input(1, "a", InputDisposition::Answered),
            output(2, OutputStatus::Final),
            input(3, "m1", InputDisposition::Merged),
            input(4, "m2", InputDisposition::Merged),
            output(5, OutputStatus::Interrupted(InterruptReason::Requested)),
            input(6, "s", InputDisposition::Superseded),
        ];
        let answer = |id| {
            find_answer(&events, id).map(|(seq, found)| match found {
                Found::Outcome(o) => (seq, o.kind, o.seq),
                Found::Failed { .. } => panic!("no turn failed here"),
            })
        };
        assert_eq!(answer("a"), Some((1, OutcomeKind::Completed, 2)));
        assert_eq!(answer("m1"), Some((3, OutcomeKind::Merged, 5)));
        assert_eq!(
            answer("m2"),
            Some((4, OutcomeKind::Interrupted(InterruptReason::Requested), 5))
        );
        assert_eq!(answer("s"), Some((6, OutcomeKind::Superseded, 6)));
        assert_eq!(answer("unknown"), None);
        let output = match find_answer(&events, "a") {
            Some((_, Found::Outcome(o))) => o.output,
            other => panic!("{other:?}"),
        };
        assert_eq!(output, "out 2");
    }

    #[test]
    fn a_failed_turn_is_answered_with_its_failure() {
        let failed = Event::new(
            2,
            Author::System,
            0,
            EventKind::TurnFailed {
                code: "model_rate_limited".into(),
                reason: "slow down".into(),
                duration_ms: 1,
            },
        );
        let events = vec![input(1, "f", InputDisposition::Answered), failed];
        let (seq, found) = find_answer(&events, "f").expect("found");
        assert_eq!((seq, found.seq()), (1, 2));
        let key = SessionKey::new("u", "s").unwrap();
        match found.into_answer(&key) {
            Err(Error::AgentFailed { kind, message, .. }) => {
                assert_eq!(kind, FailureKind::ModelRateLimited);
                assert_eq!(message, "slow down");
            }
            other => panic!("expected the stored failure, got {other:?}"),
        }
    }
}
