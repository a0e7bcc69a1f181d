#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - [`SessionKey`]: session keys and their validation.
//! - [`state`]: the pure state model — events, scopes, the fold, schema versions.
//! - [`store`]: the [`Store`] trait, its conformance suite, and the stores.
//! - [`Agent`] and [`TurnContext`]: the user's logic for one turn.
//! - [`Runtime`]: the facade — a registry of live sessions, one ractor actor each.
//!
//! Internally, `registry` maps keys to live sessions (activation, passivation, limits) and
//! `session` holds the actor that owns one session's state.

#![warn(missing_docs)]

mod agent;
mod config;
mod error;
mod key;
mod registry;
mod runtime;
mod session;
pub mod state;
mod stats;
pub mod store;
mod stream;
mod summary;
mod template;
mod turn;

pub use agent::{
    Agent, AgentError, Attributes, ContextMessage, EchoAgent, MockLlmAgent, Role, TurnContext,
};
pub use config::{
    RuntimeConfig, DEFAULT_CAPACITY, DEFAULT_IDLE_TTL, DEFAULT_MAX_CONCURRENT_TURNS,
    DEFAULT_MAX_QUEUE, DEFAULT_WINDOW, MAX_MESSAGE_BYTES,
};
pub use error::{Error, Result};
pub use key::{validate_id, KeyError, KeyPart, SessionKey, MAX_ID_BYTES};
pub use runtime::{BuildError, DrainReport, Runtime, RuntimeBuilder};
pub use session::SessionView;
pub use stats::RuntimeStats;
#[cfg(feature = "redis")]
pub use store::{RedisOptions, RedisStore};
pub use store::{FileStore, MemoryStore, Store, StoreError};
pub use stream::{StreamEvent, TurnStream};
pub use summary::{
    memory_context, ExtractiveSummarizer, Summarizer, DEFAULT_ITEMS_PER_SECTION,
    MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN,
};
pub use template::{render, MissingKey, TemplateError};
pub use turn::{CallOptions, Outcome, OutcomeKind, OverlapPolicy};
