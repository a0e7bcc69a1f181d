//! What the workload acknowledged, and the verification pass that reloads every session from the
//! store and compares.
//!
//! The ledger is one flag per (session, turn), allocated before the run starts, so that it adds
//! nothing to the memory measured during the run and costs no lock on the hot path. Inputs are
//! generated from (session, turn), so a stored input tells which turn it was.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::StreamExt;
use parking_lot::Mutex;
use turnstile::state::EventKind;
use turnstile::{SessionKey, Store};

use super::target::{Ack, Failure, FailureCounts};

/// Sessions verified at once: enough to keep a file or Redis store busy, few enough not to
/// flood it.
const VERIFY_CONCURRENCY: usize = 64;

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
    /// `acked[session * turns + turn]`.
    acked: Box<[AtomicBool]>,
    ok: AtomicU64,
    interrupted: AtomicU64,
    /// Updated on failures only: rare, so one lock is fine.
    failures: Mutex<FailureCounts>,
}

impl Ledger {
    /// An empty ledger for `sessions × turns` turns.
    pub fn new(sessions: usize, turns: usize) -> Self {
        Self {
            turns,
            acked: (0..sessions * turns)
                .map(|_| AtomicBool::new(false))
                .collect(),
            ok: AtomicU64::new(0),
            interrupted: AtomicU64::new(0),
            failures: Mutex::new(FailureCounts::default()),
        }
    }

    /// Records an acknowledged turn.
    pub fn ack(&self, session: usize, turn: usize, ack: Ack) {
        self.acked[session * self.turns + turn].store(true, Ordering::Relaxed);
        self.ok.fetch_add(1, Ordering::Relaxed);
        if ack.interrupted {
            self.interrupted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records a failed turn.
    pub fn fail(&self, failure: Failure) {
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

    /// Failed turns by reason.
    pub fn failures(&self) -> FailureCounts {
        *self.failures.lock()
    }

    /// Turns answered so far, acknowledged or not.
    pub fn done(&self) -> u64 {
        self.ok() + self.failures().total()
    }

    /// The acknowledged turns of one session, in the order they were sent.
    fn acked_turns(&self, session: usize) -> Vec<u32> {
        let row = &self.acked[session * self.turns..(session + 1) * self.turns];
        (0u32..)
            .zip(row)
            .filter(|(_, flag)| flag.load(Ordering::Relaxed))
            .map(|(turn, _)| turn)
            .collect()
    }
}

/// What the verification pass found, in turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Acknowledged turns missing from the store.
    pub lost: u64,
    /// Turns stored more than once.
    pub duplicated: u64,
    /// Stored turns out of the order they were sent in.
    pub reordered: u64,
}

impl Verdict {
    fn add(&mut self, other: Verdict) {
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
    }
}

/// Reloads every session from the store and compares it with the ledger.
pub async fn verify(
    store: &dyn Store,
    keys: &[SessionKey],
    ledger: &Ledger,
) -> Result<Verdict, String> {
    let mut checks = futures::stream::iter(keys.iter().enumerate())
        .map(|(session, key)| async move {
            let events = store
                .read_events(key, 1, usize::MAX)
                .await
                .map_err(|e| format!("verification could not read {key}: {e}"))?;
            let stored: Vec<u32> = events
                .iter()
                .filter_map(|e| match &e.kind {
                    EventKind::UserInput { text, .. } => turn_of(text),
                    _ => None,
                })
                .collect();
            Ok::<_, String>(compare(&ledger.acked_turns(session), &stored))
        })
        .buffer_unordered(VERIFY_CONCURRENCY);
    let mut total = Verdict::default();
    while let Some(verdict) = checks.next().await {
        total.add(verdict?);
    }
    Ok(total)
}

/// Compares one session's acknowledged turns (in sending order) with the turns its stored log
/// holds (in log order). Turns that failed but were stored anyway are allowed: an error does not
/// promise that nothing was written.
pub fn compare(acked: &[u32], stored: &[u32]) -> Verdict {
    let mut count: HashMap<u32, u64> = HashMap::with_capacity(stored.len());
    for turn in stored {
        *count.entry(*turn).or_default() += 1;
    }
    let lost = acked.iter().filter(|t| !count.contains_key(t)).count() as u64;
    let duplicated = count.values().map(|n| n - 1).sum();
    // Turns are sent in increasing order, so the stored log must be increasing too.
    let reordered = stored.windows(2).filter(|w| w[0] > w[1]).count() as u64;
    Verdict {
        lost,
        duplicated,
        reordered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lost: u64, duplicated: u64, reordered: u64) -> Verdict {
        Verdict {
            lost,
            duplicated,
            reordered,
        }
    }

    #[test]
    fn verification_counts_lost_duplicated_and_reordered_turns() {
        assert_eq!(compare(&[0, 1, 2], &[0, 1, 2]), v(0, 0, 0));
        assert_eq!(compare(&[0, 1, 2], &[0, 2]), v(1, 0, 0));
        assert_eq!(compare(&[0, 1], &[0, 1, 1]), v(0, 1, 0));
        assert_eq!(compare(&[0, 1, 2], &[1, 0, 2]), v(0, 0, 1));
        // A failed turn (1) that was stored anyway is not an error.
        assert_eq!(compare(&[0, 2], &[0, 1, 2]), v(0, 0, 0));
    }

    #[test]
    fn inputs_name_their_turn() {
        assert_eq!(turn_of(&input_text(12, 7)), Some(7));
        assert_eq!(turn_of("hello"), None);
    }

    #[test]
    fn the_ledger_lists_acknowledged_turns_in_order() {
        let ledger = Ledger::new(2, 3);
        let ack = Ack {
            seq: 1,
            interrupted: false,
        };
        ledger.ack(1, 2, ack);
        ledger.ack(1, 0, ack);
        ledger.fail(Failure::Busy);
        assert_eq!(ledger.acked_turns(1), vec![0, 2]);
        assert_eq!(ledger.acked_turns(0), Vec::<u32>::new());
        assert_eq!((ledger.ok(), ledger.done()), (2, 3));
    }
}
