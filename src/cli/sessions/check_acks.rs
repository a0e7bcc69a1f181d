//! `turnstile sessions check-acks FILE…`: checks ack logs written by `turnstile load --ack-log`
//! against a store, after the fact — for runs whose process was killed before its own
//! verification pass (the soak script kills them on purpose).
//!
//! Each `KEY SEQ` line is a turn the runtime acknowledged: the event at SEQ must be there and
//! answer a message (an agent output, or a superseded input). Across each session's whole log,
//! load's inputs ("turn T of session S") must appear once each and in increasing T.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;
use turnstile::state::{Event, EventKind, InputDisposition};
use turnstile::store::{read_log, LOG_PAGE};
use turnstile::{SessionKey, Store};

use crate::cli::load::turn_of;

/// What the check found.
#[derive(Debug, Default)]
struct Findings {
    acks: u64,
    sessions: u64,
    lost: u64,
    misanswered: u64,
    duplicated: u64,
    reordered: u64,
}

/// Reads every ack log, then checks each session once.
pub async fn check_acks(
    store: &dyn Store,
    files: &[PathBuf],
    json: bool,
) -> Result<ExitCode, String> {
    let mut acked: BTreeMap<SessionKey, Vec<u64>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the ack log {}: {e}", file.display()))?;
        for (number, line) in text.lines().enumerate() {
            // A kill can cut the last line short: it was never a whole acknowledgement.
            let Some((key, seq)) = line.split_once(' ') else {
                continue;
            };
            let (Ok(key), Ok(seq)) = (key.parse::<SessionKey>(), seq.parse::<u64>()) else {
                return Err(format!(
                    "{}:{}: not a `KEY SEQ` line: {line:?}",
                    file.display(),
                    number + 1
                ));
            };
            acked.entry(key).or_default().push(seq);
        }
    }
    let mut found = Findings::default();
    for (key, seqs) in &acked {
        let events = read_log(store, key, u64::MAX, LOG_PAGE)
            .await
            .map_err(|e| format!("cannot read {key}: {e}"))?;
        check_session(&events, seqs, &mut found);
    }
    let clean = found.lost + found.misanswered + found.duplicated + found.reordered == 0;
    if json {
        println!(
            "{}",
            json!({
                "acks": found.acks, "sessions": found.sessions, "lost": found.lost,
                "misanswered": found.misanswered, "duplicated": found.duplicated,
                "reordered": found.reordered, "clean": clean,
            })
        );
    } else {
        println!(
            "checked {} acknowledged turns of {} sessions: lost {}, misanswered {}, duplicated {}, reordered {}",
            found.acks, found.sessions, found.lost, found.misanswered, found.duplicated, found.reordered
        );
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn check_session(events: &[Event], acked: &[u64], found: &mut Findings) {
    found.sessions += 1;
    let mut acks_at: BTreeMap<u64, u64> = BTreeMap::new();
    for seq in acked {
        *acks_at.entry(*seq).or_default() += 1;
    }
    found.acks += acked.len() as u64;
    let index: HashMap<u64, usize> = events.iter().enumerate().map(|(i, e)| (e.seq, i)).collect();
    for (seq, acks) in acks_at {
        let Some(&at) = index.get(&seq) else {
            found.lost += acks;
            continue;
        };
        // How many messages the event at `seq` answers: a superseded input answers itself; an
        // output answers the inputs since the previous output (several when merged). More
        // acknowledgements than that name turns that are not there (say, one whose write was
        // lost and whose seq a later turn reused).
        let answers = match &events[at].kind {
            EventKind::UserInput {
                disposition: InputDisposition::Superseded,
                ..
            } => 1,
            EventKind::AgentOutput { .. } => events[..at]
                .iter()
                .rev()
                .take_while(|e| !matches!(e.kind, EventKind::AgentOutput { .. }))
                .filter(|e| {
                    matches!(&e.kind, EventKind::UserInput { disposition, .. }
                        if *disposition != InputDisposition::Superseded)
                })
                .count() as u64,
            _ => {
                found.misanswered += acks;
                continue;
            }
        };
        found.lost += acks.saturating_sub(answers);
    }
    let mut seen = std::collections::HashSet::new();
    let mut previous = None;
    for event in events {
        let EventKind::UserInput { text, .. } = &event.kind else {
            continue;
        };
        let Some(turn) = turn_of(text) else {
            continue;
        };
        if !seen.insert(turn) {
            found.duplicated += 1;
        }
        if previous.is_some_and(|p| p > turn) {
            found.reordered += 1;
        }
        previous = Some(turn);
    }
}
