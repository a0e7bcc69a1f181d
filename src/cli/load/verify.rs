//! The verification pass: reloads every session from the store and compares it with the
//! ledger — lost, duplicated, reordered and misanswered turns, and `Busy` turns stored anyway.

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::future::Future;

use futures::StreamExt;
use turnstile::state::{answer_to, Answer, Event, EventKind, OutputStatus};
use turnstile::{SessionKey, Store};

use super::ledger::{turn_of, Entry, Ledger};
use super::target::{Ack, AckKind};

/// Sessions verified at once: enough to keep a file or Redis store busy, few enough not to
/// flood it.
const VERIFY_CONCURRENCY: usize = 64;

/// What the verification pass found, in turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Acknowledged turns missing from the store.
    pub lost: u64,
    /// Turns stored more than once.
    pub duplicated: u64,
    /// Stored turns out of the order they were sent in.
    pub reordered: u64,
    /// Acknowledged turns whose acknowledged sequence number does not hold their answer: not the
    /// agent output that follows their input (or, for a superseded one, not their own input
    /// marked superseded), or marked otherwise than the outcome said.
    pub misanswered: u64,
    /// Turns answered `Busy` whose input is in the store anyway.
    pub busy_but_stored: u64,
}

impl Verdict {
    fn add(&mut self, other: Verdict) {
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.misanswered += other.misanswered;
        self.busy_but_stored += other.busy_but_stored;
    }
}

/// Where the verification pass reads each session's history back from.
pub trait History: Sync {
    /// The whole stored log of `key`, oldest first.
    fn read<'a>(
        &'a self,
        key: &'a SessionKey,
    ) -> impl Future<Output = Result<Vec<Event>, String>> + Send + 'a;
}

/// The store the workload wrote to, read directly.
impl History for dyn Store {
    async fn read<'a>(&'a self, key: &'a SessionKey) -> Result<Vec<Event>, String> {
        self.read_events(key, 1, usize::MAX)
            .await
            .map_err(|e| format!("verification could not read {key}: {e}"))
    }
}

/// Reads every session's history back and compares it with the ledger.
pub async fn verify<H: History + ?Sized>(
    history: &H,
    keys: &[SessionKey],
    ledger: &Ledger,
) -> Result<Verdict, String> {
    let mut checks = futures::stream::iter(keys.iter().enumerate())
        .map(|(session, key)| async move {
            let events = history.read(key).await?;
            Ok::<_, String>(compare(&ledger.row(session), &events))
        })
        .buffer_unordered(VERIFY_CONCURRENCY);
    let mut total = Verdict::default();
    while let Some(verdict) = checks.next().await {
        total.add(verdict?);
    }
    Ok(total)
}

/// Where a turn's input is stored: its sequence number and its index in the log.
#[derive(Debug, Clone, Copy)]
struct StoredInput {
    seq: u64,
    index: usize,
}

/// Compares one session's ledger row (indexed by turn, in sending order) with its stored log.
/// Turns that failed for another reason than `Busy` but were stored anyway are allowed: such an
/// error does not promise that nothing was written.
fn compare(row: &[Entry], events: &[Event]) -> Verdict {
    let mut verdict = Verdict::default();
    let mut inputs: HashMap<u32, StoredInput> = HashMap::with_capacity(row.len());
    let mut previous: Option<u32> = None;
    for (index, event) in events.iter().enumerate() {
        let EventKind::UserInput { text, .. } = &event.kind else {
            continue;
        };
        let Some(turn) = turn_of(text) else {
            continue;
        };
        // Turns are sent in increasing order, so the stored log must be increasing too.
        if previous.is_some_and(|p| p > turn) {
            verdict.reordered += 1;
        }
        previous = Some(turn);
        let stored = StoredInput {
            seq: event.seq,
            index,
        };
        match inputs.entry(turn) {
            Slot::Occupied(_) => verdict.duplicated += 1,
            Slot::Vacant(slot) => {
                slot.insert(stored);
            }
        }
    }
    for (turn, entry) in (0u32..).zip(row) {
        let stored = inputs.get(&turn);
        match (*entry, stored) {
            (Entry::Unknown, _) => {}
            (Entry::Busy, stored) => verdict.busy_but_stored += u64::from(stored.is_some()),
            (Entry::Acked(_) | Entry::SeqOverflow, None) => verdict.lost += 1,
            (Entry::SeqOverflow, Some(_)) => verdict.misanswered += 1,
            (Entry::Acked(ack), Some(input)) => {
                verdict.misanswered += u64::from(!answers(events, input, ack));
            }
        }
    }
    verdict
}

/// Whether the event at `ack.seq` answers the stored `input` the way `ack.kind` says: the turn
/// that answers it (as the library reads the log) ends there, and ended as the outcome said.
fn answers(events: &[Event], input: &StoredInput, ack: Ack) -> bool {
    let (end, merged) = match answer_to(events, input.index) {
        Answer::Superseded => return ack.kind == AckKind::Superseded && input.seq == ack.seq,
        Answer::Turn { end, merged } => (end, merged),
        Answer::NoTurn | Answer::Unread => return false,
    };
    let EventKind::AgentOutput { status, .. } = &end.kind else {
        return false;
    };
    end.seq == ack.seq
        && match ack.kind {
            AckKind::Merged => merged,
            AckKind::Completed => {
                !merged
                    && matches!(
                        status,
                        OutputStatus::Final | OutputStatus::Incomplete(_) | OutputStatus::Refused
                    )
            }
            AckKind::Interrupted => !merged && matches!(status, OutputStatus::Interrupted(_)),
            AckKind::Superseded => false,
        }
}

#[cfg(test)]
mod tests {
    use turnstile::state::{Author, InputDisposition, InterruptReason};

    use super::super::ledger::input_text;
    use super::*;

    fn input(seq: u64, turn: u32, disposition: InputDisposition) -> Event {
        let text = input_text(0, turn as usize);
        Event::new(
            seq,
            Author::User,
            0,
            EventKind::UserInput { text, disposition },
        )
    }

    fn output(seq: u64, status: OutputStatus) -> Event {
        let kind = EventKind::AgentOutput {
            text: String::new(),
            status,
            duration_ms: 0,
            usage: None,
        };
        Event::new(seq, Author::Agent, 0, kind)
    }

    fn acked(seq: u64, kind: AckKind) -> Entry {
        Entry::Acked(Ack { seq, kind })
    }

    /// A plain log: input and final output per turn, turn `t` at seqs `2t+1`, `2t+2`.
    fn plain(turns: &[u32]) -> Vec<Event> {
        let mut seq = 0;
        let mut events = Vec::new();
        for &turn in turns {
            events.push(input(seq + 1, turn, InputDisposition::Answered));
            events.push(output(seq + 2, OutputStatus::Final));
            seq += 2;
        }
        events
    }

    fn v(lost: u64, duplicated: u64, reordered: u64) -> Verdict {
        Verdict {
            lost,
            duplicated,
            reordered,
            ..Verdict::default()
        }
    }

    #[test]
    fn verification_counts_lost_duplicated_and_reordered_turns() {
        let c = |seq| acked(seq, AckKind::Completed);
        let three = [c(2), c(4), c(6)];
        assert_eq!(compare(&three, &plain(&[0, 1, 2])), v(0, 0, 0));
        let lost = compare(&three, &plain(&[0, 2]));
        assert_eq!((lost.lost, lost.duplicated, lost.reordered), (1, 0, 0));
        let dup = compare(&[c(2), c(4)], &plain(&[0, 1, 1]));
        assert_eq!((dup.lost, dup.duplicated, dup.reordered), (0, 1, 0));
        let reordered = compare(&[c(4), c(2), c(6)], &plain(&[1, 0, 2]));
        assert_eq!(reordered, v(0, 0, 1));
        // A failed turn (1) that was stored anyway is not an error.
        let failed = [c(2), Entry::Unknown, c(6)];
        assert_eq!(compare(&failed, &plain(&[0, 1, 2])), v(0, 0, 0));
    }

    #[test]
    fn an_acknowledged_seq_must_hold_the_answer_to_its_input() {
        let log = plain(&[0, 1]);
        // Turn 1's seq pointing at turn 0's output, at an input, or past the end.
        for wrong in [2, 3, 9] {
            let row = [
                acked(2, AckKind::Completed),
                acked(wrong, AckKind::Completed),
            ];
            assert_eq!(compare(&row, &log).misanswered, 1, "seq {wrong}");
        }
        // Said interrupted, stored final.
        let row = [acked(2, AckKind::Interrupted), acked(4, AckKind::Completed)];
        assert_eq!(compare(&row, &log).misanswered, 1);
        let row = [Entry::SeqOverflow, acked(4, AckKind::Completed)];
        assert_eq!(compare(&row, &log).misanswered, 1);
    }

    #[test]
    fn superseded_merged_and_busy_turns_are_checked_by_their_marking() {
        let interrupted = OutputStatus::Interrupted(InterruptReason::Superseded);
        // latest: 0 runs and is cut short, 1 is superseded while queued, 2 runs.
        let latest = vec![
            input(1, 0, InputDisposition::Answered),
            output(2, interrupted),
            input(3, 1, InputDisposition::Superseded),
            input(4, 2, InputDisposition::Answered),
            output(5, OutputStatus::Final),
        ];
        let row = [
            acked(2, AckKind::Interrupted),
            acked(3, AckKind::Superseded),
            acked(5, AckKind::Completed),
        ];
        assert_eq!(compare(&row, &latest), Verdict::default());
        // A superseded turn must point at its own input, marked so.
        let row = [
            acked(2, AckKind::Interrupted),
            acked(4, AckKind::Superseded),
            acked(5, AckKind::Completed),
        ];
        assert_eq!(compare(&row, &latest).misanswered, 1);
        // merge: 0 alone, then 1 and 2 in one turn.
        let merged = vec![
            input(1, 0, InputDisposition::Answered),
            output(2, OutputStatus::Final),
            input(3, 1, InputDisposition::Merged),
            input(4, 2, InputDisposition::Merged),
            output(5, OutputStatus::Final),
        ];
        let row = [
            acked(2, AckKind::Completed),
            acked(5, AckKind::Merged),
            acked(5, AckKind::Completed),
        ];
        assert_eq!(compare(&row, &merged), Verdict::default());
        let row = [acked(2, AckKind::Merged)];
        assert_eq!(compare(&row, &merged).misanswered, 1, "0 was not merged");
        // reject: a busy turn must not be stored.
        let row = [acked(2, AckKind::Completed), Entry::Busy];
        assert_eq!(compare(&row, &plain(&[0])), Verdict::default());
        assert_eq!(compare(&row, &plain(&[0, 1])).busy_but_stored, 1);
    }
}
