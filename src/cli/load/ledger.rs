//! What the workload acknowledged (the verification pass in `verify.rs` compares it with the
//! store).
//!
//! The ledger holds one `u32` per (session, turn): what became of the turn and the sequence
//! number of the event that answers it. It is allocated before the run starts, so that it adds
//! nothing to the memory measured during the run and costs no lock on the hot path; its size is
//! why `--sessions × --turns` is bounded ([`MAX_LEDGER_TURNS`]). Inputs are generated from
//! (session, turn), so a stored input tells which turn it was.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::target::{Ack, AckKind, Failure, FailureCounts};

/// Most turns (`--sessions × --turns`) one run may have: the ledger takes 4 bytes per turn, so
/// this is 200 MB, allocated up front; past it a run is refused rather than risking an OOM.
pub const MAX_LEDGER_TURNS: usize = 50_000_000;

/// Bits of a ledger entry that hold what became of the turn; the sequence number is above them.
const CODE_BITS: u32 = 3;
/// The largest sequence number an entry can hold (2^29 - 1): far above what a run can reach,
/// since a turn writes a handful of events and a run has at most [`MAX_LEDGER_TURNS`].
const MAX_ENTRY_SEQ: u64 = (u32::MAX >> CODE_BITS) as u64;

/// What the ledger knows about one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Not acknowledged, and not refused as busy (still running, or failed otherwise).
    Unknown,
    /// Acknowledged.
    Acked(Ack),
    /// Answered `Busy` (the `reject` policy): the runtime promises it was not stored.
    Busy,
    /// Acknowledged with a sequence number too large for an entry; reported as misanswered.
    SeqOverflow,
}

impl Entry {
    fn encode(self) -> u32 {
        let (seq, code) = match self {
            Self::Unknown => (0, 0),
            Self::Acked(Ack { seq, kind }) if seq <= MAX_ENTRY_SEQ => {
                let code = match kind {
                    AckKind::Completed => 1,
                    AckKind::Interrupted => 2,
                    AckKind::Superseded => 3,
                    AckKind::Merged => 4,
                };
                (seq as u32, code)
            }
            Self::Busy => (0, 5),
            Self::Acked(_) | Self::SeqOverflow => (0, 6),
        };
        (seq << CODE_BITS) | code
    }

    fn decode(bits: u32) -> Self {
        let seq = u64::from(bits >> CODE_BITS);
        let kind = match bits & ((1 << CODE_BITS) - 1) {
            1 => AckKind::Completed,
            2 => AckKind::Interrupted,
            3 => AckKind::Superseded,
            4 => AckKind::Merged,
            5 => return Self::Busy,
            6 => return Self::SeqOverflow,
            _ => return Self::Unknown,
        };
        Self::Acked(Ack { seq, kind })
    }
}

/// The input of one turn. [`turn_of`] reads it back.
pub fn input_text(session: usize, turn: usize) -> String {
    format!("turn {turn} of session {session}")
}

/// The turn number of an input made by [`input_text`]; `None` for anything else.
pub fn turn_of(text: &str) -> Option<u32> {
    text.strip_prefix("turn ")?.split(' ').next()?.parse().ok()
}

/// Acknowledgements and failures, shared by every caller.
pub struct Ledger {
    turns: usize,
    /// `entries[session * turns + turn]`, an encoded [`Entry`].
    entries: Box<[AtomicU32]>,
    ok: AtomicU64,
    interrupted: AtomicU64,
    superseded: AtomicU64,
    merged: AtomicU64,
    /// Updated on failures only: rare, so one lock is fine.
    failures: Mutex<FailureCounts>,
}

impl Ledger {
    /// An empty ledger for `sessions × turns` turns. The caller has checked that product against
    /// [`MAX_LEDGER_TURNS`].
    pub fn new(sessions: usize, turns: usize) -> Self {
        Self {
            turns,
            entries: (0..sessions * turns).map(|_| AtomicU32::new(0)).collect(),
            ok: AtomicU64::new(0),
            interrupted: AtomicU64::new(0),
            superseded: AtomicU64::new(0),
            merged: AtomicU64::new(0),
            failures: Mutex::new(FailureCounts::default()),
        }
    }

    fn set(&self, session: usize, turn: usize, entry: Entry) {
        self.entries[session * self.turns + turn].store(entry.encode(), Ordering::Relaxed);
    }

    /// Records an acknowledged turn.
    pub fn ack(&self, session: usize, turn: usize, ack: Ack) {
        let entry = if ack.seq <= MAX_ENTRY_SEQ {
            Entry::Acked(ack)
        } else {
            Entry::SeqOverflow
        };
        self.set(session, turn, entry);
        self.ok.fetch_add(1, Ordering::Relaxed);
        let counter = match ack.kind {
            AckKind::Completed => return,
            AckKind::Interrupted => &self.interrupted,
            AckKind::Superseded => &self.superseded,
            AckKind::Merged => &self.merged,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a failed turn.
    pub fn fail(&self, session: usize, turn: usize, failure: Failure) {
        if failure == Failure::Busy {
            self.set(session, turn, Entry::Busy);
        }
        self.failures.lock().add(failure);
    }

    /// Turns acknowledged so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Turns answered as interrupted.
    pub fn interrupted(&self) -> u64 {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Messages answered as superseded (`latest`).
    pub fn superseded(&self) -> u64 {
        self.superseded.load(Ordering::Relaxed)
    }

    /// Messages answered as merged into another's turn (`merge`).
    pub fn merged(&self) -> u64 {
        self.merged.load(Ordering::Relaxed)
    }

    /// Failed turns by reason.
    pub fn failures(&self) -> FailureCounts {
        *self.failures.lock()
    }

    /// Turns answered so far, acknowledged or not.
    pub fn done(&self) -> u64 {
        self.ok() + self.failures().total()
    }

    /// One session's entries, indexed by turn.
    pub fn row(&self, session: usize) -> Vec<Entry> {
        self.entries[session * self.turns..(session + 1) * self.turns]
            .iter()
            .map(|e| Entry::decode(e.load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(seq: u64, kind: AckKind) -> Entry {
        Entry::Acked(Ack { seq, kind })
    }

    #[test]
    fn ledger_entries_round_trip() {
        for entry in [
            Entry::Unknown,
            Entry::Busy,
            Entry::SeqOverflow,
            acked(1, AckKind::Completed),
            acked(MAX_ENTRY_SEQ, AckKind::Merged),
            acked(77, AckKind::Superseded),
            acked(78, AckKind::Interrupted),
        ] {
            assert_eq!(Entry::decode(entry.encode()), entry);
        }
    }

    #[test]
    fn inputs_name_their_turn() {
        assert_eq!(turn_of(&input_text(12, 7)), Some(7));
        assert_eq!(turn_of("hello"), None);
    }

    #[test]
    fn the_ledger_records_each_turn_and_counts_outcomes() {
        let ledger = Ledger::new(2, 3);
        ledger.ack(
            1,
            2,
            Ack {
                seq: 6,
                kind: AckKind::Superseded,
            },
        );
        ledger.ack(
            1,
            0,
            Ack {
                seq: 2,
                kind: AckKind::Completed,
            },
        );
        ledger.ack(
            0,
            0,
            Ack {
                seq: MAX_ENTRY_SEQ + 1,
                kind: AckKind::Completed,
            },
        );
        ledger.fail(1, 1, Failure::Busy);
        ledger.fail(0, 1, Failure::Store);
        assert_eq!(
            ledger.row(1),
            vec![
                acked(2, AckKind::Completed),
                Entry::Busy,
                acked(6, AckKind::Superseded)
            ]
        );
        assert_eq!(
            ledger.row(0),
            vec![Entry::SeqOverflow, Entry::Unknown, Entry::Unknown]
        );
        assert_eq!((ledger.ok(), ledger.done(), ledger.superseded()), (3, 5, 1));
    }
}
