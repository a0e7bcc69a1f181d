//! Conversations and their items: a conversation is a session of the acting user; its metadata
//! is the session-state key [`METADATA_KEY`]; its items are its log, a page at a time.

use serde::Serialize;
use serde_json::{json, Value};

use super::items::{entries_of, item_of, InputItem};
use super::{
    check_metadata, conversation_key, item_seq, new_id, seconds, Metadata, Responses,
    ResponsesError, MAX_ITEMS, MAX_LIST_LIMIT, METADATA_KEY,
};
use crate::call::Entry;
use crate::key::SessionKey;
use crate::state::{Seq, StateDelta};

/// Events read at a time while looking for items.
const READ_CHUNK: usize = 200;

/// Most events one listing reads before it answers with what it found: a log of mostly
/// non-item events cannot make one request read without end.
const MAX_SCAN: u64 = 20_000;

/// The session-state key a conversation made with an `Idempotency-Key` keeps its creation's
/// fingerprint under, so that the key reused with another body is refused.
const FINGERPRINT_KEY: &str = "openai.fingerprint";

/// The note that opens every conversation: a session exists once its log has an event.
const CREATED_NOTE: &str = "conversation created through the OpenAI API";

/// A conversation.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct Conversation {
    /// The session id under the acting user.
    pub id: String,
    /// Always `conversation`.
    pub object: &'static str,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    /// The conversation's metadata.
    #[cfg_attr(feature = "http", schema(value_type = Object))]
    pub metadata: Metadata,
}

/// The order of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ItemOrder {
    /// Oldest first.
    Asc,
    /// Newest first (OpenAI's default).
    #[default]
    Desc,
}

/// A page of items.
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct ItemPage {
    /// Always `list`.
    pub object: &'static str,
    /// The items.
    #[cfg_attr(feature = "http", schema(value_type = Vec<Object>))]
    pub data: Vec<Value>,
    /// The first item's id.
    pub first_id: Option<String>,
    /// The last item's id.
    pub last_id: Option<String>,
    /// Whether more follow.
    pub has_more: bool,
}

impl ItemPage {
    /// A page of `data`, of which one more than `limit` tells that more follow.
    pub fn of(mut data: Vec<Value>, limit: usize) -> Self {
        let has_more = data.len() > limit;
        data.truncate(limit);
        let id = |item: Option<&Value>| item.and_then(|i| i["id"].as_str()).map(str::to_owned);
        Self {
            object: "list",
            first_id: id(data.first()),
            last_id: id(data.last()),
            has_more,
            data,
        }
    }
}

impl Responses {
    /// The conversation as stored, or a 404.
    pub async fn conversation(&self, user: &str, id: &str) -> Result<Conversation, ResponsesError> {
        let key = conversation_key(user, id)?;
        self.read(&key).await
    }

    async fn read(&self, key: &SessionKey) -> Result<Conversation, ResponsesError> {
        let view = self.runtime().state(key).await?.ok_or_else(|| {
            ResponsesError::not_found(format!("no conversation {}", key.session_id()))
        })?;
        let metadata = view
            .record
            .state
            .get(METADATA_KEY)
            .and_then(|value| serde_json::from_value(value.clone()).ok())
            .unwrap_or_default();
        Ok(Conversation {
            id: key.session_id().to_owned(),
            object: "conversation",
            created_at: seconds(view.record.created_ms),
            metadata,
        })
    }

    /// Creates a conversation (a session) with up to [`MAX_ITEMS`] items and metadata; with
    /// `idempotency_key`, a retry gets the conversation the first attempt made.
    pub async fn create_conversation(
        &self,
        user: &str,
        items: &[InputItem],
        metadata: Metadata,
        idempotency_key: Option<&str>,
    ) -> Result<Conversation, ResponsesError> {
        let seed = idempotency_key.map(|key| format!("{user}\0{key}"));
        let key = conversation_key(user, &new_id("conv_", seed.as_deref()))?;
        check_metadata(&metadata)?;
        if items.len() > MAX_ITEMS {
            return Err(ResponsesError::invalid(
                "items",
                format!("at most {MAX_ITEMS} items at a time"),
            ));
        }
        // Checked before a retry is looked up: a request refused is refused whatever an earlier
        // one with the same key created.
        let mut entries = vec![Entry::Note(CREATED_NOTE.into())];
        entries.extend(entries_of(items)?);
        // A retry of a creation that was stored answers what was stored — when it asks for
        // what the first asked for: the key names one request.
        let fingerprint =
            super::request::fingerprint(&json!({"items": items, "metadata": metadata}));
        if let Some(idempotency_key) = idempotency_key {
            if let Some(view) = self.runtime().state(&key).await? {
                let first = view
                    .record
                    .state
                    .get(FINGERPRINT_KEY)
                    .and_then(|v| v.as_str());
                if first.is_some_and(|first| first != fingerprint) {
                    return Err(ResponsesError::Runtime(
                        crate::error::Error::RequestMismatch {
                            key,
                            request_id: idempotency_key.to_owned(),
                        },
                    ));
                }
                return self.read(&key).await;
            }
        }
        let mut state = StateDelta::from([(METADATA_KEY.to_owned(), json!(metadata))]);
        if idempotency_key.is_some() {
            state.insert(FINGERPRINT_KEY.to_owned(), json!(fingerprint));
        }
        self.runtime().append(&key, entries, state).await?;
        self.read(&key).await
    }

    /// Replaces the conversation's metadata.
    pub async fn update_conversation(
        &self,
        user: &str,
        id: &str,
        metadata: Metadata,
    ) -> Result<Conversation, ResponsesError> {
        let key = conversation_key(user, id)?;
        check_metadata(&metadata)?;
        // Appending creates a session: only an existing one is updated.
        self.read(&key).await?;
        let state = StateDelta::from([(METADATA_KEY.to_owned(), json!(metadata))]);
        self.runtime().append(&key, Vec::new(), state).await?;
        self.read(&key).await
    }

    /// Deletes the conversation: the session, its history and state.
    pub async fn delete_conversation(&self, user: &str, id: &str) -> Result<(), ResponsesError> {
        let key = conversation_key(user, id)?;
        if !self.runtime().delete(&key).await? {
            return Err(ResponsesError::not_found(format!("no conversation {id}")));
        }
        Ok(())
    }

    /// A page of the conversation's items: up to `limit` after the item `after` (or from the
    /// start), in `order`.
    pub async fn items(
        &self,
        user: &str,
        id: &str,
        limit: usize,
        after: Option<&str>,
        order: ItemOrder,
    ) -> Result<ItemPage, ResponsesError> {
        let key = conversation_key(user, id)?;
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(ResponsesError::invalid(
                "limit",
                format!("limit must be between 1 and {MAX_LIST_LIMIT}"),
            ));
        }
        let after = match after.map(item_seq) {
            None => None,
            Some(Some(seq)) => Some(seq),
            Some(None) => return Err(ResponsesError::invalid("after", "no such item")),
        };
        let last = self.last_seq(&key).await?;
        let items = match order {
            ItemOrder::Asc => {
                self.items_forward(&key, after.map_or(1, |s| s + 1), limit + 1)
                    .await?
            }
            ItemOrder::Desc => {
                let through = after.map_or(last, |s| s.saturating_sub(1).min(last));
                self.items_backward(&key, through, limit + 1).await?
            }
        };
        Ok(ItemPage::of(items, limit))
    }

    /// Adds up to [`MAX_ITEMS`] items to the conversation without running a turn: the next
    /// response sees them. Answers the items as stored.
    pub async fn add_items(
        &self,
        user: &str,
        id: &str,
        items: &[InputItem],
    ) -> Result<Vec<Value>, ResponsesError> {
        let key = conversation_key(user, id)?;
        if items.is_empty() || items.len() > MAX_ITEMS {
            return Err(ResponsesError::invalid(
                "items",
                format!("give 1 to {MAX_ITEMS} items"),
            ));
        }
        let entries = entries_of(items)?;
        // Appending creates a session: only an existing conversation takes items.
        self.last_seq(&key).await?;
        let count = entries.len();
        let first = self
            .runtime()
            .append(&key, entries, Default::default())
            .await?;
        self.items_forward(&key, first, count).await
    }

    /// One item of the conversation.
    pub async fn item(&self, user: &str, id: &str, item: &str) -> Result<Value, ResponsesError> {
        let key = conversation_key(user, id)?;
        let missing = || ResponsesError::not_found(format!("no item {item} in conversation {id}"));
        let seq = item_seq(item).ok_or_else(missing)?;
        let events = self.runtime().events(&key, seq, 1).await?;
        events
            .first()
            .filter(|event| event.seq == seq)
            .and_then(item_of)
            .filter(|found| found["id"] == item)
            .ok_or_else(missing)
    }

    /// The last seq of the conversation's log, or a 404 when there is no such conversation.
    async fn last_seq(&self, key: &SessionKey) -> Result<Seq, ResponsesError> {
        self.runtime().last_seq(key).await?.ok_or_else(|| {
            ResponsesError::not_found(format!("no conversation {}", key.session_id()))
        })
    }

    /// Up to `want` items from `from` on (ascending), reading at most [`MAX_SCAN`] events.
    async fn items_forward(
        &self,
        key: &SessionKey,
        from: Seq,
        want: usize,
    ) -> Result<Vec<Value>, ResponsesError> {
        let mut items = Vec::new();
        let mut next = from;
        while items.len() < want && next - from < MAX_SCAN {
            let events = self.runtime().events(key, next, READ_CHUNK).await?;
            let Some(last) = events.last() else { break };
            next = last.seq + 1;
            items.extend(events.iter().filter_map(item_of));
        }
        items.truncate(want);
        Ok(items)
    }

    /// Up to `want` items through `through` going back (newest first), reading at most
    /// [`MAX_SCAN`] events.
    async fn items_backward(
        &self,
        key: &SessionKey,
        through: Seq,
        want: usize,
    ) -> Result<Vec<Value>, ResponsesError> {
        let mut items = Vec::new();
        let mut end = through;
        while items.len() < want && end > 0 && through - end < MAX_SCAN {
            let from = end.saturating_sub(READ_CHUNK as Seq - 1).max(1);
            let events = self
                .runtime()
                .events(key, from, (end - from + 1) as usize)
                .await?;
            items.extend(events.iter().rev().filter_map(item_of));
            end = from - 1;
        }
        items.truncate(want);
        Ok(items)
    }
}
