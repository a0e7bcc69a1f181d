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

use std::collections::{HashMap, HashSet};

use super::Live;
use crate::call::{Outcome, OutcomeKind};
use crate::error::Error;
use crate::session::TurnRequest;
use crate::state::{Event, EventKind, InputDisposition, OutputStatus, Seq};

/// Request ids of the messages running or waiting in a session, and the retries attached to
/// them.
#[derive(Default)]
pub(crate) struct InFlight {
    ids: HashSet<String>,
    retries: HashMap<String, Vec<TurnRequest>>,
}

impl Live {
    /// Answers `request` if its id was seen before (from the log, or later with the answer of
    /// the message in flight); returns it when it is a new message to admit.
    pub(crate) async fn replay(&mut self, request: TurnRequest) -> Option<TurnRequest> {
        let Some(id) = request.request_id.clone() else {
            return Some(request);
        };
        if self.journal.lease_lost() {
            // Another process may own the session now: nothing here is vouched for.
            let refused = self.journal.not_owner();
            self.answer(request, Err(refused));
            return None;
        }
        let requests = self.requests.get_or_insert_with(Box::default);
        if requests.ids.contains(&id) {
            requests.retries.entry(id).or_default().push(request);
            return None;
        }
        // The window holds only what the store acknowledged (the journal settled before this).
        let Some((_, outcome)) = find_answer(self.journal.window().events(), &id) else {
            requests.ids.insert(id);
            return Some(request);
        };
        // The first answer may have been `NotReplicated` (or lost): a stored turn is acknowledged
        // only once the replicas the store waits for hold it. One this session saw acknowledged
        // in full needs no check.
        let answer = if self.journal.acknowledged_in_full(outcome.seq) {
            Ok(outcome)
        } else {
            let store = self.deps.store.clone();
            let version = self.journal.record().version;
            match store.confirm_replicated(&self.key, version).await {
                Ok(()) => Ok(outcome),
                Err(error) => Err(Error::store(&self.key, error)),
            }
        };
        if answer.is_ok() {
            metrics::counter!("turnstile_replayed_total").increment(1);
        }
        self.answer(request, answer);
        None
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

/// The outcome of the message with request id `id` among `events`: its input's seq, and the
/// answer its caller got (or would have got).
pub(super) fn find_answer(events: &[Event], id: &str) -> Option<(Seq, Outcome)> {
    let pos = events.iter().rposition(|e| {
        e.request_id.as_deref() == Some(id) && matches!(e.kind, EventKind::UserInput { .. })
    })?;
    let input = &events[pos];
    let EventKind::UserInput { disposition, .. } = &input.kind else {
        return None;
    };
    if *disposition == InputDisposition::Superseded {
        let outcome = Outcome {
            kind: OutcomeKind::Superseded,
            output: String::new(),
            seq: input.seq,
        };
        return Some((input.seq, outcome));
    }
    let rest = &events[pos + 1..];
    let at = rest
        .iter()
        .position(|e| matches!(e.kind, EventKind::AgentOutput { .. }))?;
    let EventKind::AgentOutput { text, status, .. } = &rest[at].kind else {
        return None;
    };
    // Of a merged turn's inputs, only the last is answered with the turn's own outcome.
    let merged_later = rest[..at]
        .iter()
        .any(|e| matches!(e.kind, EventKind::UserInput { .. }));
    let kind = match (merged_later, status) {
        (true, _) => OutcomeKind::Merged,
        (false, OutputStatus::Final) => OutcomeKind::Completed,
        (false, OutputStatus::Interrupted(reason)) => OutcomeKind::Interrupted(*reason),
    };
    let outcome = Outcome {
        kind,
        output: text.clone(),
        seq: rest[at].seq,
    };
    Some((input.seq, outcome))
}

/// The answer for each message of a turn: the last message gets the turn's outcome, earlier
/// (merged) ones `Merged` with the same output.
pub(super) fn answers_for(
    requests: &[TurnRequest],
    events: &[Event],
    failure: Option<Error>,
) -> Vec<Result<Outcome, Error>> {
    if let Some(err) = failure {
        return requests.iter().map(|_| Err(err.clone())).collect();
    }
    let output = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::AgentOutput { text, status, .. } => Some((e.seq, text.clone(), *status)),
        _ => None,
    });
    let Some((seq, text, status)) = output else {
        return Vec::new();
    };
    let last_kind = match status {
        OutputStatus::Final => OutcomeKind::Completed,
        OutputStatus::Interrupted(reason) => OutcomeKind::Interrupted(reason),
    };
    let n = requests.len();
    (0..n)
        .map(|i| {
            Ok(Outcome {
                kind: if i + 1 == n {
                    last_kind
                } else {
                    OutcomeKind::Merged
                },
                output: text.clone(),
                seq,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, InterruptReason};

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
        let answer = |id| find_answer(&events, id).map(|(seq, o)| (seq, o.kind, o.seq));
        assert_eq!(answer("a"), Some((1, OutcomeKind::Completed, 2)));
        assert_eq!(answer("m1"), Some((3, OutcomeKind::Merged, 5)));
        assert_eq!(
            answer("m2"),
            Some((4, OutcomeKind::Interrupted(InterruptReason::Requested), 5))
        );
        assert_eq!(answer("s"), Some((6, OutcomeKind::Superseded, 6)));
        assert_eq!(answer("unknown"), None);
        assert_eq!(
            find_answer(&events, "a").map(|(_, o)| o.output),
            Some("out 2".into())
        );
    }
}
