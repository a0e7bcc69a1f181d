#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - [`SessionKey`]: session keys and their validation.
//! - [`state`]: the pure state model — events, scopes, the fold, schema versions.
//! - [`store`]: the [`Store`] trait, its conformance suite, and the stores.
//! - [`Agent`] and [`TurnContext`]: the user's logic for one turn.
//! - [`context`]: what an agent sees — the context window, compaction's [`Summarizer`], the
//!   `<memory-context>` block and templates.
//! - [`Runtime`]: the facade — a registry of live sessions, one ractor actor each.
//!
//! Internally, `registry` maps keys to live sessions (activation, passivation, limits) and
//! `session` holds the actor that owns one session's state.

#![warn(missing_docs)]

mod agent;
mod atomic_file;
mod call;
mod channel;
mod config;
pub mod context;
mod error;
#[cfg(feature = "redis")]
mod hex;
#[cfg(feature = "http")]
mod http;
mod key;
mod registry;
mod runtime;
mod session;
pub mod state;
mod stats;
pub mod store;
mod stream;

pub use agent::{
    Agent, AgentError, Attributes, EchoAgent, MockLlmAgent, TurnContext, TurnContextBuilder,
    TurnRecording,
};
pub use call::{CallOptions, Outcome, OutcomeKind, OverlapPolicy};
pub use channel::open_pairings;
#[cfg(feature = "redis")]
pub use channel::RedisPairingStore;
pub use channel::{
    channel_namespace, channel_session_key, unpaired_user, validate_channel,
    validate_channel_field, validate_user, ChannelError, ChannelField, ChannelMessage,
    ChannelReply, ChannelRoute, ChannelRouter, FilePairingStore, MemoryPairingStore, Pairing,
    PairingError, PairingStore, CHANNEL_SEPARATOR, CHANNEL_USER_PREFIX, DEFAULT_CHANNEL_POLICY,
    MAX_CHANNEL_NAME_BYTES, PAIRINGS_FILE,
};
pub use config::{
    RuntimeConfig, DEFAULT_CAPACITY, DEFAULT_IDLE_TTL, DEFAULT_MAX_CONCURRENT_TURNS,
    DEFAULT_MAX_QUEUE, DEFAULT_WINDOW, MAX_MESSAGE_BYTES, MAX_UNSAVED_EVENTS,
};
pub use context::{
    memory_context, render, ContextMessage, ExtractiveSummarizer, MissingKey, Role, Summarizer,
    TemplateError, DEFAULT_ITEMS_PER_SECTION, MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN,
};
pub use error::{Error, Result};
#[cfg(feature = "http")]
pub use http::{
    ApiError, Gateway, Grant, HttpConfig, ServeError, Tokens, TokensError, DEFAULT_BODY_LIMIT,
    DEFAULT_CONNECTION_GRACE, DEFAULT_DRAIN_DEADLINE, DEFAULT_REQUEST_TIMEOUT, MIN_TOKEN_BYTES,
};
pub use key::{validate_id, KeyError, KeyPart, SessionKey, MAX_ID_BYTES};
pub use runtime::{BuildError, DrainReport, Runtime, RuntimeBuilder};
pub use session::SessionView;
pub use stats::RuntimeStats;
pub use store::{FileStore, MemoryStore, Store, StoreError};
#[cfg(feature = "postgres")]
pub use store::{PostgresOptions, PostgresStore};
#[cfg(feature = "redis")]
pub use store::{RedisOptions, RedisStore};
pub use stream::{StreamEvent, TurnStream};
