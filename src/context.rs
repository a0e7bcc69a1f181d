//! What an agent sees of its conversation: the context window, the summary that compaction makes
//! of older events, the `<memory-context>` block that carries that summary back, and templates
//! filled from scoped state.
//!
//! # Layout
//!
//! - `window`: which of a session's newest events the agent sees, and how they read as chat
//!   messages ([`ContextMessage`], [`Role`]).
//! - `summarizer`: compaction's [`Summarizer`] trait and the built-in [`ExtractiveSummarizer`].
//! - `memory`: [`memory_context`] and [`memory_block`], the block a resumed session's summary
//!   and entries recalled from the user's memory are wrapped in.
//! - `template`: [`render`], filling `{scope:key}` placeholders.
//!
//! This module knows the state model only; the session actor decides when to compact, and
//! [`crate::TurnContext`] hands all of it to the agent.

mod memory;
mod summarizer;
mod template;
mod window;

pub use memory::{memory_block, memory_context, MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN};
pub use summarizer::{ExtractiveSummarizer, Summarizer, SummaryError, DEFAULT_ITEMS_PER_SECTION};
pub use template::{render, MissingKey, TemplateError};
pub(crate) use window::{chat_messages, Window};
pub use window::{ContextMessage, Role};
