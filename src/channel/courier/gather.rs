//! Gathering (`debounce`, `burst`): the messages of a chat that came before it paused, made
//! into turns. Pure; the courier's workers do the waiting.

use std::time::Duration;

use crate::call::Entry;
use crate::channel::{ChannelMessage, InboxEntry};

/// Most messages gathered into one turn: past it the turn is answered at once, so that a flood
/// makes bounded turns (and a turn's messages stay well inside the session's window, where a
/// retry of its request id is recognised).
pub(crate) const MAX_GATHERED: usize = 20;

/// Most bytes of input gathered into one turn: a burst is one message, and the runtime refuses
/// one past its `max_input_bytes` (1 MiB by default).
pub(crate) const MAX_GATHERED_BYTES: usize = 256 * 1024;

/// A gathered turn is answered at the latest this many pauses after its first message, even if
/// the chat never pauses.
pub(crate) const MAX_PAUSES: u32 = 10;

/// How a worker gathers its chat's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gathering {
    pub(crate) kind: Gather,
    /// How long the chat must be quiet.
    pub(crate) pause: Duration,
}

/// What a gathered turn answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gather {
    /// The last message; the earlier ones come before it in the history.
    Debounce,
    /// All of them, as one message.
    Burst,
}

/// What a chat's queue holds.
#[derive(Debug)]
pub(crate) enum Queued {
    /// A message just accepted: it may be gathered with the next ones.
    Fresh(InboxEntry),
    /// A turn made before a restart (its entries name the one that answers them): handed over
    /// as it was made, never gathered with anything else.
    Formed(Turn),
}

/// One turn: the entry whose reply answers it and the entries answered with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    /// Answered by the turn's reply; the turn runs with its request id.
    pub(crate) last: InboxEntry,
    /// Gathered before it, oldest first.
    pub(crate) earlier: Vec<InboxEntry>,
}

impl Turn {
    /// The message the turn runs and the entries written before it.
    pub(crate) fn message(&self, gather: Option<Gather>) -> (ChannelMessage, Vec<Entry>) {
        let mut message = self.last.message.clone();
        match gather {
            _ if self.earlier.is_empty() => (message, Vec::new()),
            Some(Gather::Burst) => {
                let mut lines: Vec<&str> = self
                    .earlier
                    .iter()
                    .map(|e| e.message.input.as_str())
                    .collect();
                lines.push(&self.last.message.input);
                message.input = lines.join("\n");
                (message, Vec::new())
            }
            Some(Gather::Debounce) | None => {
                let earlier = self
                    .earlier
                    .iter()
                    .map(|e| Entry::User(e.message.input.clone()))
                    .collect();
                (message, earlier)
            }
        }
    }
}

/// The session an entry's message goes to, as `channel|chat|thread`.
pub(crate) fn session_of(entry: &InboxEntry) -> String {
    let message = &entry.message;
    match &message.thread {
        Some(thread) => format!("{}|{}|{}", message.channel, message.chat, thread),
        None => format!("{}|{}", message.channel, message.chat),
    }
}

/// The pending entries of a channel (oldest first) as their chats' queues take them again after
/// a restart: entries gathered into a turn (`answered_by`) with the entry that answers them, the
/// rest fresh; and the entries whose answering entry is done already (their turn was answered),
/// to be marked done.
pub(crate) fn resumed(pending: Vec<InboxEntry>) -> (Vec<Queued>, Vec<InboxEntry>) {
    let waiting: std::collections::HashSet<String> = pending.iter().map(|e| e.id.clone()).collect();
    let mut earlier: std::collections::HashMap<String, Vec<InboxEntry>> = Default::default();
    let mut settled = Vec::new();
    let mut lasts = Vec::new();
    for entry in pending {
        match entry.answered_by.clone() {
            Some(by) if by != entry.id && waiting.contains(&by) => {
                earlier.entry(by).or_default().push(entry);
            }
            Some(by) if by != entry.id => settled.push(entry),
            _ => lasts.push(entry),
        }
    }
    let queued = lasts
        .into_iter()
        .map(|last| match earlier.remove(&last.id) {
            Some(before) => Queued::Formed(Turn {
                last,
                earlier: before,
            }),
            None => Queued::Fresh(last),
        })
        .collect();
    (queued, settled)
}

/// Splits gathered entries into turns, one per session, in the order of each session's first
/// message (a chat-wide worker gathers several threads).
pub(crate) fn turns(gathered: Vec<InboxEntry>) -> Vec<Turn> {
    let mut turns: Vec<(String, Vec<InboxEntry>)> = Vec::new();
    for entry in gathered {
        let session = session_of(&entry);
        match turns.iter_mut().find(|(s, _)| *s == session) {
            Some((_, entries)) => entries.push(entry),
            None => turns.push((session, vec![entry])),
        }
    }
    turns
        .into_iter()
        .filter_map(|(_, mut entries)| {
            let last = entries.pop()?;
            Some(Turn {
                last,
                earlier: entries,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ReplyTarget;

    fn entry(id: &str, thread: Option<&str>, input: &str) -> InboxEntry {
        let mut message = ChannelMessage::new("slack", "C1", "U1", input);
        message.thread = thread.map(str::to_owned);
        let target = ReplyTarget::Slack {
            channel: "C1".into(),
            thread_ts: None,
        };
        InboxEntry::new(id.into(), message, target, 0)
    }

    #[test]
    fn a_restart_makes_the_same_turns_of_gathered_messages() {
        let mut first = entry("1", None, "a");
        first.answered_by = Some("3".into());
        let mut second = entry("2", None, "b");
        second.answered_by = Some("3".into());
        let mut orphan = entry("4", None, "c");
        orphan.answered_by = Some("0".into()); // its turn's last message is done
        let (queued, settled) = resumed(vec![
            first,
            second,
            entry("3", None, "d"),
            orphan,
            entry("5", None, "e"),
        ]);
        assert_eq!(
            settled.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["4"]
        );
        assert_eq!(queued.len(), 2);
        let Queued::Formed(turn) = &queued[0] else {
            panic!("not the formed turn: {queued:?}");
        };
        assert_eq!(turn.last.id, "3");
        assert_eq!(
            turn.earlier
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            ["1", "2"]
        );
        assert!(matches!(&queued[1], Queued::Fresh(e) if e.id == "5"));
    }

    #[test]
    fn gathered_messages_make_one_turn_per_session_in_order() {
        let gathered = vec![
            entry("1", None, "a"),
            entry("2", Some("t"), "b"),
            entry("3", None, "c"),
        ];
        let turns = turns(gathered);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].last.id, "3");
        assert_eq!(turns[0].earlier[0].id, "1");
        assert_eq!(turns[1].last.id, "2");
        assert!(turns[1].earlier.is_empty());
    }

    #[test]
    fn debounce_answers_the_last_after_the_rest_and_burst_answers_all_as_one() {
        let turn = Turn {
            last: entry("3", None, "three"),
            earlier: vec![entry("1", None, "one"), entry("2", None, "two")],
        };
        let (message, earlier) = turn.message(Some(Gather::Debounce));
        assert_eq!(message.input, "three");
        assert_eq!(
            earlier,
            vec![Entry::User("one".into()), Entry::User("two".into())]
        );
        let (message, earlier) = turn.message(Some(Gather::Burst));
        assert_eq!(message.input, "one\ntwo\nthree");
        assert!(earlier.is_empty());
        let single = Turn {
            last: entry("9", None, "x"),
            earlier: Vec::new(),
        };
        assert_eq!(single.message(Some(Gather::Burst)).0.input, "x");
    }
}
