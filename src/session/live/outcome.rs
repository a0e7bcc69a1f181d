//! A finished turn, decided without effects: the events it writes and what each of its callers
//! is answered, first as planned and then as the store's answer to the write makes it.
//!
//! [`Live::finish`](super::Live::finish) only gathers what the turn left, hands it here, gives
//! the events to the journal and sends the answers; every rule about what a turn becomes is in
//! this file, where a unit test can reach it.

use super::replay;
use crate::agent::TurnRecord;
use crate::call::{Outcome, OutcomeKind};
use crate::error::Error;
use crate::session::task::{self, Message, TurnEnd, TurnWrite};
use crate::state::{Event, Seq, TurnTiming};

/// What a turn left when it ended, as the pure decision needs it.
pub(super) struct Ended<'a> {
    /// How the turn ended (after the interrupt and reply-bound rules of [`task::settle`]).
    pub end: TurnEnd,
    /// The error every caller of a failed turn gets.
    pub failure: Option<Error>,
    /// What the agent recorded.
    pub record: TurnRecord,
    /// The messages the turn answered (several when merged), with their request ids and the
    /// entries they brought.
    pub messages: Vec<Message<'a>>,
    /// The messages superseded while the turn ran: they follow the turn in the log.
    pub superseded: Vec<Message<'a>>,
    pub duration_ms: u64,
    /// Where the turn's time went: carried by the event that ends it.
    pub timing: TurnTiming,
    /// The sequence number the turn's first event takes.
    pub next_seq: Seq,
    pub now_ms: u64,
}

/// What to write and what to answer.
#[derive(Debug)]
pub(super) struct Decided {
    /// The turn's events, numbered, request ids on the messages (and the entries they brought)
    /// that carry them.
    pub events: Vec<Event>,
    /// The planned answer of each of the turn's own messages, in order; the store's answer to
    /// the write may still turn it into an error ([`after_write`]).
    pub answers: Vec<Result<Outcome, Error>>,
    /// The sequence number of each superseded message's input event, in order.
    pub superseded_seqs: Vec<Seq>,
    /// The seq and id of the event that ends the turn, when it ran (superseded messages come
    /// after it).
    pub ending: Option<(Seq, uuid::Uuid)>,
}

/// Decides what a turn writes and answers. A turn that did not run (no permit) writes its
/// superseded messages only and answers its callers with its failure.
pub(super) fn decide(ended: Ended<'_>) -> Decided {
    let ran = !matches!(ended.end, TurnEnd::Nothing);
    let mut timing = ended.timing;
    // A failed turn keeps none of its tool events, so its record names no tool calls either.
    if matches!(ended.end, TurnEnd::Failed { .. }) {
        timing.tool_start_ms.clear();
    }
    let write = TurnWrite {
        messages: &ended.messages,
        record: ended.record,
        end: ended.end,
        duration_ms: ended.duration_ms,
        superseded: &ended.superseded,
    };
    let written = task::turn_events(write, ended.next_seq, ended.now_ms);
    let mut events = written.events;
    let turn = &events[..written.turn_len];
    let answers = replay::answers_for(ended.messages.len(), turn, ended.failure);
    let mut ending = None;
    if ran {
        if let Some(end) = events[..written.turn_len].last_mut() {
            end.timing = Some(Box::new(timing));
            ending = Some((end.seq, end.id));
        }
    }
    Decided {
        events,
        answers,
        superseded_seqs: written.superseded_seqs,
        ending,
    }
}

/// A planned answer once the store has answered the write: a write that failed fails every
/// answer that needed it — an outcome, and a failed turn's failure (the failure is recorded as
/// the turn's outcome, so unsaved it is not acknowledged either).
pub(super) fn after_write(
    saved: &Result<(), Error>,
    planned: Result<Outcome, Error>,
) -> Result<Outcome, Error> {
    match (saved, planned) {
        (Err(err), Ok(_) | Err(Error::AgentFailed { .. })) => Err(err.clone()),
        (_, planned) => planned,
    }
}

/// The answer of a message superseded by the turn, whose input event is `seq`.
pub(super) fn superseded_answer(saved: &Result<(), Error>, seq: Seq) -> Result<Outcome, Error> {
    match saved {
        Ok(()) => Ok(Outcome {
            kind: OutcomeKind::Superseded,
            output: String::new(),
            seq,
            usage: None,
            calls: Vec::new(),
        }),
        Err(err) => Err(err.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::FailureKind;
    use crate::key::SessionKey;
    use crate::state::{EventKind, InterruptReason, OutputStatus};
    use crate::store::StoreError;

    fn messages<'a>(inputs: &'a [String], ids: &[Option<&'a str>]) -> Vec<Message<'a>> {
        inputs
            .iter()
            .zip(ids)
            .map(|(text, id)| Message {
                preceding: &[],
                text,
                request_id: id.map(str::to_owned),
            })
            .collect()
    }

    fn ended<'a>(end: TurnEnd, inputs: &'a [String], ids: &[Option<&'a str>]) -> Ended<'a> {
        Ended {
            end,
            failure: None,
            record: TurnRecord::default(),
            messages: messages(inputs, ids),
            superseded: Vec::new(),
            duration_ms: 7,
            timing: TurnTiming {
                agent_ms: 5,
                ..TurnTiming::default()
            },
            next_seq: 10,
            now_ms: 1_000,
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn key() -> SessionKey {
        SessionKey::new("u", "s").expect("a valid key")
    }

    #[test]
    fn a_merged_turn_answers_its_last_message_completed_and_the_others_merged() {
        let inputs = strings(&["a", "b"]);
        let end = TurnEnd::Output("reply".into(), OutputStatus::Final);
        let decided = decide(ended(end, &inputs, &[Some("r1"), None]));
        let seqs: Vec<Seq> = decided.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![10, 11, 12], "two inputs and the output");
        assert_eq!(decided.events[0].request_id.as_deref(), Some("r1"));
        assert_eq!(decided.events[1].request_id, None);
        let timed: Vec<Seq> = decided
            .events
            .iter()
            .filter(|e| e.timing.as_ref().is_some_and(|t| t.agent_ms == 5))
            .map(|e| e.seq)
            .collect();
        assert_eq!(timed, vec![12], "only the output carries the timing");
        let kinds: Vec<OutcomeKind> = decided
            .answers
            .iter()
            .map(|a| a.as_ref().expect("answered").kind)
            .collect();
        assert_eq!(kinds, vec![OutcomeKind::Merged, OutcomeKind::Completed]);
        for answer in &decided.answers {
            let outcome = answer.as_ref().expect("answered");
            assert_eq!((outcome.output.as_str(), outcome.seq), ("reply", 12));
        }
        assert!(decided.superseded_seqs.is_empty());
    }

    #[test]
    fn superseded_messages_follow_the_turn_with_their_own_request_ids() {
        let inputs = strings(&["first"]);
        let reason = InterruptReason::Superseded;
        let end = TurnEnd::Output("par".into(), OutputStatus::Interrupted(reason));
        let mut turn = ended(end, &inputs, &[Some("r1")]);
        let later = strings(&["newer", "newest"]);
        turn.superseded = messages(&later, &[Some("r2"), None]);
        let decided = decide(turn);
        let last = decided.events.len();
        assert_eq!(
            decided.superseded_seqs,
            vec![10 + last as u64 - 2, 10 + last as u64 - 1]
        );
        assert_eq!(decided.events[last - 2].request_id.as_deref(), Some("r2"));
        assert_eq!(decided.events[last - 1].request_id, None);
        let outcome = decided.answers[0].as_ref().expect("answered");
        assert_eq!(outcome.kind, OutcomeKind::Interrupted(reason));
        assert_eq!(outcome.output, "par");
        // The turn ends at its output (the seq its caller is answered with), not at the
        // superseded messages written after it.
        let end = &decided.events[last - 3];
        assert_eq!(decided.ending, Some((outcome.seq, end.id)));
        assert_eq!(end.seq, outcome.seq);
    }

    #[test]
    fn a_turn_that_never_ran_writes_only_what_it_superseded_and_answers_its_failure() {
        let inputs = strings(&["lost"]);
        let mut turn = ended(TurnEnd::Nothing, &inputs, &[Some("r1")]);
        turn.failure = Some(Error::ConcurrencyLimitExceeded { limit: 1 });
        let later = strings(&["later"]);
        turn.superseded = messages(&later, &[Some("r2")]);
        let decided = decide(turn);
        assert_eq!(decided.events.len(), 1, "{:?}", decided.events);
        assert!(matches!(
            decided.events[0].kind,
            EventKind::UserInput { .. }
        ));
        assert_eq!(decided.events[0].request_id.as_deref(), Some("r2"));
        assert_eq!(decided.superseded_seqs, vec![10]);
        assert!(
            decided.events[0].timing.is_none(),
            "a turn that never ran has none"
        );
        assert_eq!(decided.ending, None, "nor an ending");
        assert!(matches!(
            decided.answers.as_slice(),
            [Err(Error::ConcurrencyLimitExceeded { limit: 1 })]
        ));
    }

    #[test]
    fn a_failed_write_fails_outcomes_and_failures_but_not_other_errors() {
        let stored = Err(Error::store(
            &key(),
            StoreError::Unavailable {
                backend: "test",
                detail: "store down".into(),
            },
        ));
        let outcome = Outcome {
            kind: OutcomeKind::Completed,
            output: "x".into(),
            seq: 3,
            usage: None,
            calls: Vec::new(),
        };
        assert!(matches!(
            after_write(&stored, Ok(outcome.clone())),
            Err(Error::Store { .. })
        ));
        let failed = Error::AgentFailed {
            key: key(),
            message: "model down".into(),
            kind: FailureKind::ModelUnavailable,
            retry_after: None,
        };
        assert!(matches!(
            after_write(&stored, Err(failed.clone())),
            Err(Error::Store { .. })
        ));
        let refused = Error::ConcurrencyLimitExceeded { limit: 2 };
        assert!(matches!(
            after_write(&stored, Err(refused)),
            Err(Error::ConcurrencyLimitExceeded { limit: 2 })
        ));
        assert!(matches!(after_write(&Ok(()), Ok(outcome.clone())), Ok(o) if o == outcome));
        assert!(matches!(
            after_write(&Ok(()), Err(failed)),
            Err(Error::AgentFailed { .. })
        ));
        assert!(matches!(
            superseded_answer(&Ok(()), 9),
            Ok(Outcome {
                kind: OutcomeKind::Superseded,
                seq: 9,
                ..
            })
        ));
        assert!(superseded_answer(&stored, 9).is_err());
    }
}
