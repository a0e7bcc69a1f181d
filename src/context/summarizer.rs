//! Compaction's summarizer: what turns the events that slid out of the context window into a
//! summary, and the built-in deterministic one.

use async_trait::async_trait;

use crate::state::{Event, EventKind, InputDisposition, OutputStatus};

/// What a summarizer may fail with: any error (the same type as
/// [`AgentError`](crate::AgentError), so an agent's error passes through unchanged). A failed
/// compaction is tried again later; the session goes on.
pub type SummaryError = Box<dyn std::error::Error + Send + Sync>;

/// Turns a span of old events into a summary. In production this is usually an LLM call.
///
/// Called off the turn's critical path, never concurrently for one session. `previous` is the
/// session's current summary (which the new one replaces), `span` the events to fold in, oldest
/// first; summaries themselves are never part of a span.
#[async_trait]
pub trait Summarizer: Send + Sync + 'static {
    /// Returns the new summary.
    async fn summarize(
        &self,
        previous: Option<&str>,
        span: &[Event],
    ) -> Result<String, SummaryError>;
}

/// Most items kept per section by [`ExtractiveSummarizer`]: enough to carry a long conversation's
/// gist, small enough that the summary (written with every turn's head) stays a few KB.
pub const DEFAULT_ITEMS_PER_SECTION: usize = 12;

/// Longest item, in characters; longer text is cut with an ellipsis.
const MAX_ITEM_CHARS: usize = 200;

/// A deterministic summarizer for tests and demos. For the compacted span it extracts, into five
/// sections: tasks asked, what was done, decisions, open items, stated user preferences. Items
/// from `previous` are carried over verbatim; past `items_per_section` items a section keeps its
/// first two (what the conversation started with) and its newest.
#[derive(Debug, Clone)]
pub struct ExtractiveSummarizer {
    items_per_section: usize,
}

impl Default for ExtractiveSummarizer {
    fn default() -> Self {
        Self {
            items_per_section: DEFAULT_ITEMS_PER_SECTION,
        }
    }
}

impl ExtractiveSummarizer {
    /// A summarizer keeping at most `items` items per section.
    pub fn with_items_per_section(items: usize) -> Self {
        Self {
            items_per_section: items.max(1),
        }
    }
}

const SECTIONS: [&str; 5] = [
    "Tasks asked",
    "What was done",
    "Decisions",
    "Open items",
    "User preferences",
];

const DECISION_MARKERS: [&str; 6] = [
    "decided",
    "we will",
    "let's",
    "agreed",
    "chose",
    "going with",
];
const OPEN_MARKERS: [&str; 5] = ["todo", "later", "next step", "follow up", "remind"];
const PREFERENCE_MARKERS: [&str; 8] = [
    "i prefer",
    "i like",
    "i want",
    "i don't like",
    "call me",
    "my name is",
    "please always",
    "please never",
];

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    async fn summarize(
        &self,
        previous: Option<&str>,
        span: &[Event],
    ) -> Result<String, SummaryError> {
        let mut sections = previous.map(parse).unwrap_or_default();
        // A failed turn's input was never answered: left out, as it is of the model's context.
        let failed = crate::state::in_failed_turns(span);
        for (event, _) in span.iter().zip(failed).filter(|(_, failed)| !failed) {
            extract(event, &mut sections);
        }
        for items in &mut sections {
            cap(items, self.items_per_section);
        }
        Ok(format(&sections))
    }
}

type Sections = [Vec<String>; 5];

/// Items at the start of a section that capping keeps: a conversation's first asks frame it.
const KEEP_FIRST: usize = 2;

/// Keeps the first [`KEEP_FIRST`] items and the newest rest, `max` in all.
fn cap(items: &mut Vec<String>, max: usize) {
    let excess = items.len().saturating_sub(max);
    if excess == 0 {
        return;
    }
    let first = KEEP_FIRST.min(max.saturating_sub(1));
    items.drain(first..first + excess);
}

fn extract(event: &Event, sections: &mut Sections) {
    match &event.kind {
        EventKind::UserInput { text, disposition } => {
            let note = match disposition {
                InputDisposition::Superseded => " (superseded before it ran)",
                _ => "",
            };
            sections[0].push(format!("{}{note}", clip(text)));
            for sentence in sentences(text) {
                let lower = sentence.to_lowercase();
                if PREFERENCE_MARKERS.iter().any(|m| lower.contains(m)) {
                    sections[4].push(clip(sentence));
                }
                if DECISION_MARKERS.iter().any(|m| lower.contains(m)) {
                    sections[2].push(clip(sentence));
                }
            }
        }
        EventKind::AgentOutput { text, status, .. } => {
            let first = sentences(text).next().unwrap_or_default();
            match status {
                OutputStatus::Final => sections[1].push(clip(first)),
                OutputStatus::Interrupted(_) => {
                    sections[3].push(format!("interrupted while answering: {}", clip(first)));
                }
                OutputStatus::Incomplete(_) => {
                    sections[3].push(format!("cut short while answering: {}", clip(first)));
                }
                OutputStatus::Refused => sections[1].push(format!("refused: {}", clip(first))),
            }
            for sentence in sentences(text) {
                let lower = sentence.to_lowercase();
                if DECISION_MARKERS.iter().any(|m| lower.contains(m)) {
                    sections[2].push(clip(sentence));
                }
                if OPEN_MARKERS.iter().any(|m| lower.contains(m)) {
                    sections[3].push(clip(sentence));
                }
            }
        }
        EventKind::ToolCall { name, .. } => sections[1].push(format!("called tool {name}")),
        _ => {}
    }
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(['.', '!', '?', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn clip(text: &str) -> String {
    let text = text.trim().replace('\n', " ");
    match text.char_indices().nth(MAX_ITEM_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn format(sections: &Sections) -> String {
    let mut out = String::new();
    for (title, items) in SECTIONS.iter().zip(sections) {
        if items.is_empty() {
            continue;
        }
        out.push_str(title);
        out.push_str(":\n");
        for item in items {
            out.push_str("- ");
            out.push_str(item);
            out.push('\n');
        }
    }
    out
}

/// Reads a summary in this summarizer's own format back into sections. Text in another format is
/// carried as one "Tasks asked" item, so nothing recalled is dropped silently.
fn parse(text: &str) -> Sections {
    let mut sections: Sections = Default::default();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(title) = line.strip_suffix(':') {
            current = SECTIONS.iter().position(|s| *s == title);
            if current.is_some() {
                continue;
            }
        }
        match (current, line.strip_prefix("- ")) {
            (Some(i), Some(item)) => sections[i].push(item.to_owned()),
            _ if line.trim().is_empty() => {}
            _ => sections[0].push(clip(line)),
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Author, InterruptReason};

    fn user(seq: u64, text: &str) -> Event {
        Event::new(
            seq,
            Author::User,
            0,
            EventKind::UserInput {
                text: text.into(),
                disposition: InputDisposition::Answered,
            },
        )
    }

    fn agent(seq: u64, text: &str, status: OutputStatus) -> Event {
        Event::new(
            seq,
            Author::Agent,
            0,
            EventKind::AgentOutput {
                text: text.into(),
                status,
                duration_ms: 0,
                usage: None,
            },
        )
    }

    #[tokio::test]
    async fn the_summary_extracts_tasks_work_decisions_open_items_and_preferences() {
        let span = [
            user(1, "Please book a flight to Oslo. I prefer window seats."),
            agent(
                2,
                "Booked flight SK123. We will confirm the hotel later.",
                OutputStatus::Final,
            ),
            user(3, "Let's go with the cheaper hotel."),
            agent(
                4,
                "Searching hotels",
                OutputStatus::Interrupted(InterruptReason::Requested),
            ),
        ];
        let text = ExtractiveSummarizer::default()
            .summarize(None, &span)
            .await
            .unwrap();
        let expect = [
            "Tasks asked:\n- Please book a flight to Oslo. I prefer window seats.\n- Let's go with the cheaper hotel.\n",
            "What was done:\n- Booked flight SK123.\n",
            "Decisions:\n- We will confirm the hotel later.\n- Let's go with the cheaper hotel.\n",
            "Open items:\n- We will confirm the hotel later.\n- interrupted while answering: Searching hotels\n",
            "User preferences:\n- I prefer window seats.\n",
        ];
        for part in expect {
            assert!(text.contains(part), "missing {part:?} in:\n{text}");
        }
    }

    #[tokio::test]
    async fn earlier_items_are_carried_and_sections_are_capped() {
        let s = ExtractiveSummarizer::with_items_per_section(3);
        let first = s
            .summarize(None, &[user(1, "one"), user(2, "two")])
            .await
            .unwrap();
        let second = s
            .summarize(Some(&first), &[user(3, "three"), user(4, "four")])
            .await
            .unwrap();
        assert_eq!(second, "Tasks asked:\n- one\n- two\n- four\n");
        let foreign = s
            .summarize(Some("free text from elsewhere"), &[])
            .await
            .unwrap();
        assert!(foreign.contains("free text from elsewhere"));
    }
}
