//! The context window: which of a session's newest events its agent sees, and how they read as
//! chat messages.

use std::sync::Arc;

use crate::state::{in_failed_turns, Event, EventKind, Seq};

/// Who a [`ContextMessage`] speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions and recalled background.
    System,
    /// The person.
    User,
    /// The agent.
    Assistant,
    /// A tool's result.
    Tool,
}

/// One message of the agent's context, as chat APIs take them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContextMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

/// The newest events a live session holds for its agent's context.
#[derive(Debug, Clone, Default)]
pub(crate) struct Window {
    /// Between `size` and `2 × size` of the newest events, oldest first: trimmed in halves (and
    /// the room freed given back), so that trimming is amortised O(1) per event. Behind an `Arc` so that a turn gets a snapshot
    /// without copying; `Arc::make_mut` copies only if a turn still holds it.
    events: Arc<Vec<Event>>,
    /// How many events the agent sees at most (the runtime's `window`).
    size: usize,
}

/// What of an event the window keeps: all but its timing record, which no agent reads (it stays
/// in the store, where the events and turns routes read it), so that every live session is
/// smaller by it.
fn for_the_context(event: &mut Event) {
    event.timing = None;
}

impl Window {
    /// A window of at most `size` visible events, starting from `events` (oldest first).
    pub(crate) fn new(mut events: Vec<Event>, size: usize) -> Self {
        events.iter_mut().for_each(for_the_context);
        Self {
            events: Arc::new(events),
            size,
        }
    }

    /// How many events the agent sees at most.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The events held, oldest first, shared.
    pub(crate) fn events(&self) -> &Arc<Vec<Event>> {
        &self.events
    }

    /// Appends events, dropping the oldest half once twice the size is held.
    pub(crate) fn extend(&mut self, events: Vec<Event>) {
        let held = Arc::make_mut(&mut self.events);
        // Grown by half rather than doubled, and to no more than a turn needs when that is
        // more: every live session keeps its window while idle, and doubling would leave up to
        // half of it unused. Still geometric, so appending stays amortised O(1) per event
        // whatever the window's size.
        if held.capacity() - held.len() < events.len() {
            held.reserve_exact(events.len().max(held.len() / 2));
        }
        held.extend(events.into_iter().map(|mut event| {
            for_the_context(&mut event);
            event
        }));
        let limit = self.size.max(1);
        if held.len() >= 2 * limit {
            held.drain(..held.len() - limit);
            held.shrink_to_fit();
        }
    }

    /// How many of the newest events the agent sees: at most `size`, none at or before `covered`
    /// (the last event the summary covers or `clear_context` removed).
    ///
    /// Events are held in `seq` order, so this looks at the oldest event that could be visible
    /// and, only when that one is covered, searches for the first that is not: a turn does not
    /// walk (and pull into the cache) the whole window to start.
    pub(crate) fn visible(&self, covered: Seq) -> usize {
        let held = self.events.len();
        let most = held.min(self.size);
        if most == 0 || self.events[held - most].seq > covered {
            return most;
        }
        let first_uncovered = self.events.partition_point(|e| e.seq <= covered);
        held - first_uncovered
    }
}

/// The context as chat messages: the memory block first (pinned: it never slides out of the
/// window), then the events that speak (inputs, outputs, tool calls and results), without the
/// failed turns (see [`in_failed_turns`]).
pub(crate) fn chat_messages(memory: Option<String>, history: &[Event]) -> Vec<ContextMessage> {
    let mut out = Vec::with_capacity(history.len() + 1);
    if let Some(block) = memory {
        out.push(ContextMessage {
            role: Role::System,
            content: block,
        });
    }
    let failed = in_failed_turns(history);
    for (event, failed) in history.iter().zip(failed) {
        if failed {
            continue;
        }
        let (role, content) = match &event.kind {
            EventKind::UserInput { text, .. } => (Role::User, text.clone()),
            EventKind::AgentOutput { text, .. } => (Role::Assistant, text.clone()),
            EventKind::ToolCall {
                name, arguments, ..
            } => (Role::Assistant, format!("[tool call] {name} {arguments}")),
            EventKind::ToolResult { result, .. } => (Role::Tool, result.to_string()),
            _ => continue,
        };
        out.push(ContextMessage { role, content });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, InputDisposition, OutputStatus};

    fn input(seq: Seq) -> Event {
        Event::new(
            seq,
            Author::User,
            0,
            EventKind::UserInput {
                text: format!("m{seq}"),
                disposition: InputDisposition::Answered,
            },
        )
    }

    #[test]
    fn failed_turns_and_their_inputs_are_left_out_of_the_messages() {
        let failed = Event::new(
            3,
            Author::System,
            0,
            EventKind::TurnFailed {
                code: "model_timeout".into(),
                reason: "silent".into(),
                duration_ms: 0,
            },
        );
        let output = Event::new(
            5,
            Author::Agent,
            0,
            EventKind::AgentOutput {
                text: "answer".into(),
                status: OutputStatus::Final,
                duration_ms: 0,
                usage: None,
            },
        );
        let history = [input(1), input(2), failed, input(4), output];
        assert_eq!(
            in_failed_turns(&history),
            [true, true, true, false, false],
            "a merged failed turn's inputs are all its own"
        );
        let messages = chat_messages(None, &history);
        let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["m4", "answer"]);
    }

    fn seqs(window: &Window) -> Vec<Seq> {
        window.events().iter().map(|e| e.seq).collect()
    }

    #[test]
    fn the_window_holds_between_size_and_twice_size_events() {
        let mut window = Window::new(Vec::new(), 3);
        for seq in 1..=5 {
            window.extend(vec![input(seq)]);
        }
        assert_eq!(seqs(&window), vec![1, 2, 3, 4, 5]);
        window.extend(vec![input(6)]);
        assert_eq!(seqs(&window), vec![4, 5, 6]);
    }

    #[test]
    fn a_snapshot_held_by_a_turn_is_not_changed_by_later_events() {
        let mut window = Window::new(vec![input(1)], 4);
        let snapshot = window.events().clone();
        window.extend(vec![input(2)]);
        assert_eq!(snapshot.len(), 1);
        assert_eq!(seqs(&window), vec![1, 2]);
    }

    #[test]
    fn covered_events_and_events_past_the_size_are_not_visible() {
        let window = Window::new((1..=6).map(input).collect(), 4);
        assert_eq!(window.visible(0), 4, "at most `size`");
        assert_eq!(window.visible(4), 2, "none the summary covers");
        assert_eq!(window.visible(6), 0);
    }

    #[test]
    fn visible_counts_the_uncovered_events_at_the_end_for_every_cut() {
        // Seqs with gaps (compaction and clears leave none, but a window must not rely on it).
        let seqs = [3, 4, 7, 8, 9, 12];
        for size in 1..=7 {
            let window = Window::new(seqs.iter().map(|&s| input(s)).collect(), size);
            for covered in 0..=13 {
                let walked = seqs.iter().rev().take_while(|&&s| s > covered).count();
                assert_eq!(
                    window.visible(covered),
                    walked.min(size),
                    "size {size}, covered through {covered}"
                );
            }
        }
    }

    #[test]
    fn the_memory_block_comes_first_and_silent_events_are_left_out() {
        let history = [
            input(1),
            Event::new(2, Author::System, 0, EventKind::ContextCleared {}),
        ];
        let messages = chat_messages(Some("recalled".into()), &history);
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![Role::System, Role::User]);
        assert_eq!(messages[1].content, "m1");
    }
}
