#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! The root exports what a first user needs: [`Runtime`] and its builder, [`SessionKey`],
//! [`Agent`] and [`TurnContext`], [`CallOptions`] and [`Outcome`], [`Error`], and the stores.
//! Everything else lives in a family of its own.
//!
//! Public modules:
//! - [`state`]: the pure state model — events, scopes, the fold, schema versions. No I/O.
//! - [`key`]: session keys and the rules every id follows.
//! - [`agent`]: the [`Agent`] trait, [`TurnContext`] and its builder, the built-in agents, and
//!   (feature `openai`) [`OpenAiAgent`], a model behind an OpenAI-compatible endpoint, with its
//!   [`Tool`] trait, and (feature `mcp`) [`McpTools`], its tools from MCP servers.
//! - The families of stored data, each a trait with its reference implementation in memory and,
//!   with the `testing` feature, its conformance suite: [`store`] (sessions and their leases,
//!   [`store::Leases`], for one owner per session across processes, and store wrappers),
//!   [`pairing`] (channel accounts to users), [`artifact`] (named, versioned blobs per session
//!   or user), [`memory`] (memory across sessions, BM25-ranked).
//! - [`backend`]: one folder per storage technology (files, Redis and Redis Cluster,
//!   PostgreSQL), each with its kit and the families kept on it, and the openers
//!   ([`backend::StoreUrl`], [`backend::open_store`], [`backend::open_backend`]).
//! - [`state_keys`]: a registry of declared state keys (type, default, description) and the
//!   mode that enforces it.
//! - [`context`]: what an agent sees — the context window, compaction's summarizer, the
//!   `<memory-context>` block and templates.
//! - [`config`]: [`RuntimeConfig`] and the defaults and bounds it starts from, each with its reason.
//! - [`channel`]: multi-channel bots — channel messages to sessions.
//! - [`responses`]: OpenAI's Responses, Conversations and Chat Completions APIs over sessions —
//!   the rules the HTTP routes only format.
//! - [`http`] (feature `http`): the HTTP gateway behind `turnstile serve`.
//!
//! Private modules, each one concern:
//! - `call`: what a caller passes ([`CallOptions`], [`OverlapPolicy`]) and gets ([`Outcome`]).
//! - `stream`: [`TurnStream`], a streamed turn's chunks and outcome.
//! - `runtime`: the facade and its builder; it only delegates.
//! - `registry`: which sessions are live — a synchronous state machine (`registry/slots`) whose
//!   decisions the registry carries out, capacity waiting lines, each session's supervising task
//!   and the idle reaper.
//! - `session`: the actor that owns one session's state — its overlap-policy queue, the running
//!   turn, persistence and compaction, retries answered from the log, and (with ownership) the
//!   leases of live sessions.
//! - `stats`: counters, recorded once for [`RuntimeStats`] and the `metrics` recorder.
//! - `error`: the crate-level [`Error`].
//! - `fuzzing` (feature `testing`, hidden): the checks the fuzz targets and property tests
//!   share; see `docs/fuzzing.md`.
//! - `atomic_file`, `hex`, `parse`: small helpers shared by the backends and the families.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod agent;
pub mod artifact;
mod atomic_file;
pub mod backend;
mod call;
pub mod channel;
mod channel_message;
pub mod config;
pub mod context;
mod error;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzzing;
mod hex;
#[cfg(feature = "http")]
pub mod http;
mod inbox;
pub mod key;
pub mod memory;
pub mod pairing;
mod parse;
mod registry;
pub mod responses;
mod runtime;
mod session;
pub mod state;
pub mod state_keys;
mod stats;
pub mod store;
mod stream;

pub use agent::{
    Agent, AgentError, AgentFailure, EchoAgent, FailureKind, MockLlmAgent, TurnContext,
};
#[cfg(feature = "mcp")]
pub use agent::{McpError, McpServer, McpTools, McpToolsBuilder, McpTransport};
#[cfg(feature = "openai")]
pub use agent::{OpenAiAgent, OpenAiBuilder, OpenAiError, Tool, ToolError};
pub use artifact::{ArtifactError, ArtifactScope, ArtifactStore};
pub use backend::FileStore;
#[cfg(feature = "postgres")]
pub use backend::{PostgresOptions, PostgresStore};
#[cfg(feature = "redis")]
pub use backend::{RedisOptions, RedisStore};
pub use call::{
    check_request_id, CallOptions, Entry, Outcome, OutcomeKind, OverlapPolicy, Streamed,
    StreamedCall, StreamedResult,
};
pub use config::RuntimeConfig;
pub use error::{Error, Result, StoreFault};
pub use key::{KeyError, SessionKey};
pub use memory::{Ingest, MemoryError, MemoryHit, MemoryOptions};
pub use parse::ParseError;
pub use registry::{LivePage, LiveQuery, LiveSession, LiveState};
pub use runtime::{
    BuildError, DrainReport, Placement, Readiness, Runtime, RuntimeBuilder, MAX_PAGE,
    MAX_REQUEST_SCAN, MAX_TURN_EVENTS,
};
pub use session::SessionView;
pub use stats::{publish_alert_counters, RuntimeStats, TurnTimes};
#[allow(deprecated)]
pub use store::MemoryStore;
pub use store::{InMemoryStore, Owner, Page, PageRequest, SessionMeta, Store, StoreError};
pub use stream::{StreamEvent, TurnStream};
