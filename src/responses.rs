//! OpenAI's Responses, Conversations and Chat Completions APIs over sessions: the rules, decided
//! once here, that the HTTP routes (`turnstile serve`) only format. A conversation is a session
//! of the acting user; a response is a turn — same FIFO, overlap policy, idempotency and
//! durability as any call — and a resource from its creation (retrieved while it runs,
//! cancelled from any connection, run detached with `background`); cancel is interrupt; items
//! are the session's log.
//!
//! Build one [`Responses`] over a [`Runtime`] and call it with what a request said (its JSON
//! body, the acting user, an `Idempotency-Key`); it answers with OpenAI's objects as JSON and a
//! streamed response's typed events. `docs/openai-api.md` describes every route.
//!
//! # Layout
//!
//! - `ids`: conversation, response and item ids.
//! - `items`: what a client sends (input items) and a log shown as items.
//! - `request`: a response request read field by field — each acted on, or refused by name.
//! - `object`: response objects, from an outcome or a stored turn.
//! - `running`: responses in flight, and creating, retrieving and cancelling them.
//! - `events`: a streamed response's typed events.
//! - `conversations`: conversations and their items.
//! - `chat`: chat completions.

mod chat;
mod conversations;
mod events;
mod ids;
mod items;
mod object;
mod placement;
mod request;
mod running;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

pub use chat::{ChatAnswer, ChatChunk, ChatChunks, ChatCompletion, ChatRequest};
pub use conversations::{Conversation, ItemOrder, ItemPage};
pub use events::{ResponseEvent, ResponseEvents};
pub use ids::{
    check_conversation_id, conversation_key, item_seq, new_id, ResponseId,
    MAX_CONVERSATION_ID_BYTES,
};
pub use items::{item_of, InputItem, Role, Said};
pub use object::ResponseObject;
pub use request::{ResponseRequest, MAX_INPUT_ITEMS, MAX_TOOLS};
pub use running::{Created, Finished};

use crate::error::Error;
use crate::runtime::Runtime;

/// The user an admin (or an open server) acts for when a request names none.
pub const DEFAULT_USER: &str = "openai";

/// Most metadata pairs on a conversation or a response: OpenAI's own bound.
pub const MAX_METADATA_PAIRS: usize = 16;

/// Longest metadata key, in bytes (OpenAI's bound).
pub const MAX_METADATA_KEY_BYTES: usize = 64;

/// Longest metadata value, in bytes (OpenAI's bound).
pub const MAX_METADATA_VALUE_BYTES: usize = 512;

/// Most items one request adds to a conversation (its creation, `POST …/items`) and most
/// messages of a chat completion: OpenAI's bound on adding items.
pub const MAX_ITEMS: usize = 20;

/// Most items a listing returns per page (OpenAI's bound).
pub const MAX_LIST_LIMIT: usize = 100;

/// Longest `model` string kept, in bytes.
pub const MAX_MODEL_BYTES: usize = 256;

/// The session-state key a conversation's metadata is kept under.
pub const METADATA_KEY: &str = "openai.metadata";

/// Metadata: at most [`MAX_METADATA_PAIRS`] string pairs within their byte bounds.
pub type Metadata = BTreeMap<String, String>;

/// Why a request to OpenAI's API was not answered as asked.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ResponsesError {
    /// A field of the request is malformed, or asks for what this server does not do.
    #[error("{message}")]
    Invalid {
        /// The field (`input`, `tools`…).
        param: String,
        /// What is wrong, and what to send instead.
        message: String,
    },
    /// What the request names does not exist (for the acting user).
    #[error("{message}")]
    NotFound {
        /// The field that named it, if one did.
        param: Option<String>,
        /// What was not found.
        message: String,
    },
    /// The runtime refused or failed the call.
    #[error(transparent)]
    Runtime(#[from] Error),
    /// Something failed that the caller cannot act on (a bug); the detail is for the log.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ResponsesError {
    pub(crate) fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self::Invalid {
            param: param.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound {
            param: None,
            message: message.into(),
        }
    }

    pub(crate) fn not_found_in(param: &str, message: impl Into<String>) -> Self {
        Self::NotFound {
            param: Some(param.to_owned()),
            message: message.into(),
        }
    }
}

/// Checks metadata against its bounds.
pub fn check_metadata(metadata: &Metadata) -> Result<(), ResponsesError> {
    if metadata.len() > MAX_METADATA_PAIRS {
        return Err(ResponsesError::invalid(
            "metadata",
            format!(
                "metadata holds {} pairs; at most {MAX_METADATA_PAIRS} are allowed",
                metadata.len()
            ),
        ));
    }
    for (key, value) in metadata {
        if key.is_empty() || key.len() > MAX_METADATA_KEY_BYTES {
            return Err(ResponsesError::invalid(
                "metadata",
                format!("metadata keys are 1 to {MAX_METADATA_KEY_BYTES} bytes"),
            ));
        }
        if value.len() > MAX_METADATA_VALUE_BYTES {
            return Err(ResponsesError::invalid(
                "metadata",
                format!("metadata values are at most {MAX_METADATA_VALUE_BYTES} bytes"),
            ));
        }
    }
    Ok(())
}

/// Checks a `model` field's length; any name is accepted (the session's agent answers).
pub fn check_model(model: &str) -> Result<(), ResponsesError> {
    if model.len() > MAX_MODEL_BYTES {
        return Err(ResponsesError::invalid(
            "model",
            format!("model is at most {MAX_MODEL_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Seconds since the Unix epoch, from milliseconds: OpenAI's `created_at`.
pub(crate) fn seconds(ms: u64) -> u64 {
    ms / 1000
}

/// Now, in seconds since the Unix epoch.
pub(crate) fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's API over a runtime's sessions. Cheap to clone; every clone is the same service
/// (and knows the same responses in flight).
#[derive(Clone)]
pub struct Responses {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    /// The model a response records when its request names none.
    default_model: String,
    /// Responses whose turns have not ended, by response id: retrieve and cancel reach them
    /// from any request. An entry lives as long as its turn, not as its request: it is removed
    /// by the task that drives the turn, when the turn's outcome is in.
    running: Mutex<HashMap<String, Arc<running::Running>>>,
}

impl std::fmt::Debug for Responses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responses")
            .field("default_model", &self.inner.default_model)
            .field("running", &self.inner.running.lock().len())
            .finish_non_exhaustive()
    }
}

impl Responses {
    /// The API over `runtime`'s sessions; responses whose request names no model record
    /// `default_model`.
    pub fn new(runtime: Runtime, default_model: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                default_model: default_model.into(),
                running: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The runtime it serves.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Responses whose turns have not ended yet.
    pub fn running(&self) -> usize {
        self.inner.running.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_past_its_bounds_is_refused() {
        let many: Metadata = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_metadata(&many).is_err());
        let long: Metadata = [("k".to_owned(), "v".repeat(513))].into();
        assert!(check_metadata(&long).is_err());
        let key: Metadata = [("k".repeat(65), "v".into())].into();
        assert!(check_metadata(&key).is_err());
        let fine: Metadata = (0..16).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_metadata(&fine).is_ok());
    }
}
