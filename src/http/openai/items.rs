//! Items: a conversation's log as OpenAI shows it, and the messages a client adds to it.
//!
//! A user input is a `message` of role `user`, an agent's output one of role `assistant`, a
//! tool call a `function_call` and its result a `function_call_output`; the rest of the log
//! (notes, summaries, failures, cleared markers, artifacts) is no item. An item's id is its
//! kind and its event's seq (`msg_7`), so it names one event of the log for good.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::conversations::ConversationPath;
use super::{about, acting_user, conversation_key, MAX_ITEMS, MAX_LIST_LIMIT};
use crate::call::Entry;
use crate::error::Error;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::gateway::Gateway;
use crate::http::schema::Refusals;
use crate::key::SessionKey;
use crate::state::{Event, EventKind, OutputStatus, Seq, ToolStatus};
use crate::store::Store;

/// Events read from the store at a time while looking for items.
const READ_CHUNK: usize = 200;

/// Most events one listing reads before it answers with what it found: a log of mostly
/// non-item events cannot make one request read without end.
const MAX_SCAN: u64 = 20_000;

/// Items per page unless `limit` says otherwise (OpenAI's default).
const DEFAULT_LIMIT: usize = 20;

/// A message a client sends: a role and text, as a string or as text parts.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub(crate) struct InputItem {
    /// `message` (the default).
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// `user`, `assistant`, `system` or `developer`.
    // Read as optional (as is `content`), so that an item of another type is refused saying
    // why rather than for a missing field.
    #[serde(default)]
    #[schema(required = true)]
    role: String,
    /// A string, or parts `{"type": "input_text" | "output_text" | "text", "text"}`.
    #[serde(default)]
    #[schema(value_type = Object, required = true)]
    content: Option<Content>,
}

/// A message's content.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// One part of a message's content: text only.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

impl InputItem {
    /// The item's role and its text (parts joined by blank lines), or why it is refused.
    pub(crate) fn text(&self) -> Result<(&str, String), ApiError> {
        if let Some(kind @ ("function_call_output" | "function_call")) = self.kind.as_deref() {
            return Err(ApiError::BadRequest(format!(
                "items of type {kind:?} are not taken: the session's agent calls its tools \
                 itself (its own and its MCP servers') and records the calls in the \
                 conversation; a client cannot answer a tool call"
            )));
        }
        if self.kind.as_deref().is_some_and(|kind| kind != "message") {
            return Err(ApiError::BadRequest(format!(
                "items of type {:?} are not supported here; only messages with text are",
                self.kind.as_deref().unwrap_or_default()
            )));
        }
        if self.role.is_empty() {
            return Err(ApiError::BadRequest("a message needs its role".into()));
        }
        let text = match &self.content {
            None => return Err(ApiError::BadRequest("a message needs its content".into())),
            Some(Content::Text(text)) => text.clone(),
            Some(Content::Parts(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                for part in parts {
                    match (part.kind.as_str(), &part.text) {
                        ("input_text" | "output_text" | "text", Some(text)) => texts.push(text),
                        (kind, _) => {
                            return Err(ApiError::BadRequest(format!(
                                "content parts of type {kind:?} are not supported; only text is"
                            )))
                        }
                    }
                }
                texts
                    .into_iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join("\n\n")
            }
        };
        Ok((self.role.as_str(), text))
    }
}

/// The log entries of messages added without a turn: user and assistant messages only (a
/// system message has no place in a session's log).
pub(crate) fn entries_of(items: Vec<InputItem>) -> Result<Vec<Entry>, ApiError> {
    items
        .iter()
        .map(|item| match item.text()? {
            ("user", text) => Ok(Entry::User(text)),
            ("assistant", text) => Ok(Entry::Agent(text)),
            (role, _) => Err(ApiError::BadRequest(format!(
                "messages of role {role:?} cannot be added to a conversation; add user or \
                 assistant messages, and give instructions with a response"
            ))),
        })
        .collect()
}

/// The item an event shows as, if it is one.
pub(crate) fn item_of(event: &Event) -> Option<Value> {
    let seq = event.seq;
    Some(match &event.kind {
        EventKind::UserInput { text, .. } => json!({
            "type": "message", "id": format!("msg_{seq}"), "status": "completed",
            "role": "user", "content": [{"type": "input_text", "text": text}],
        }),
        EventKind::AgentOutput { text, status, .. } => json!({
            "type": "message", "id": format!("msg_{seq}"),
            "status": match status { OutputStatus::Final => "completed", _ => "incomplete" },
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        EventKind::ToolCall {
            call_id,
            name,
            arguments,
            ..
        } => json!({
            "type": "function_call", "id": format!("fc_{seq}"), "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments.to_string(),
        }),
        EventKind::ToolResult {
            call_id,
            result,
            status,
            ..
        } => json!({
            "type": "function_call_output", "id": format!("fco_{seq}"),
            "status": if *status == ToolStatus::Ok { "completed" } else { "incomplete" },
            "call_id": call_id,
            "output": match result.as_ref() { Value::String(s) => s.clone(), other => other.to_string() },
        }),
        _ => return None,
    })
}

/// The seq an item id names, if it is one of ours.
fn seq_of(item: &str) -> Option<Seq> {
    let (kind, seq) = item.rsplit_once('_')?;
    matches!(kind, "msg" | "fc" | "fco")
        .then(|| seq.parse().ok())
        .flatten()
        .filter(|seq| *seq > 0)
}

/// `POST …/items`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddBody {
    /// Up to 20 user or assistant messages.
    items: Vec<InputItem>,
}

/// `GET …/items`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Items per page, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<usize>,
    /// The id of the item the page starts after.
    after: Option<String>,
    /// `asc` or `desc` (the default: newest first).
    order: Option<String>,
    /// Accepted and ignored: items carry everything they have.
    #[serde(default)]
    #[allow(dead_code)]
    include: Option<String>,
}

/// A page of items.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ItemList {
    /// Always `list`.
    object: &'static str,
    #[schema(value_type = Vec<Object>)]
    data: Vec<Value>,
    first_id: Option<String>,
    last_id: Option<String>,
    has_more: bool,
}

impl ItemList {
    pub(crate) fn of(mut data: Vec<Value>, limit: usize) -> Self {
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

/// An item's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ItemPath {
    /// The conversation's id.
    #[param(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    conversation: String,
    /// The item's id (`msg_7`).
    item: String,
}

/// The last seq of the session's log, or a 404 when there is no such conversation.
pub(crate) async fn last_seq(store: &dyn Store, key: &SessionKey) -> Result<Seq, ApiError> {
    let head = store
        .load(key, 0)
        .await
        .map_err(|err| Error::store(key, err))?
        .record
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {}", key.session_id())))?;
    Ok(head.next_seq.saturating_sub(1))
}

/// Up to `want` items from `from` on (ascending), reading at most [`MAX_SCAN`] events.
pub(crate) async fn items_forward(
    store: &dyn Store,
    key: &SessionKey,
    from: Seq,
    want: usize,
) -> Result<Vec<Value>, ApiError> {
    let mut items = Vec::new();
    let mut next = from;
    while items.len() < want && next - from < MAX_SCAN {
        let events = store
            .read_events(key, next, READ_CHUNK)
            .await
            .map_err(|err| Error::store(key, err))?;
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
    store: &dyn Store,
    key: &SessionKey,
    through: Seq,
    want: usize,
) -> Result<Vec<Value>, ApiError> {
    let mut items = Vec::new();
    let mut end = through;
    while items.len() < want && end > 0 && through - end < MAX_SCAN {
        let from = end.saturating_sub(READ_CHUNK as Seq - 1).max(1);
        let events = store
            .read_events(key, from, (end - from + 1) as usize)
            .await
            .map_err(|err| Error::store(key, err))?;
        items.extend(events.iter().rev().filter_map(item_of));
        end = from - 1;
    }
    items.truncate(want);
    Ok(items)
}

/// The conversation's items, a page at a time, read from the store.
#[utoipa::path(get, path = "/v1/conversations/{conversation}/items", tag = "openai",
    params(ConversationPath, ListQuery), responses((status = 200, body = ItemList), Refusals))]
pub(crate) async fn list_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIST_LIMIT {
        let error = ApiError::BadRequest(format!("limit must be between 1 and {MAX_LIST_LIMIT}"));
        return Ok(about("limit", error));
    }
    let after = match query.after.as_deref().map(seq_of) {
        None => None,
        Some(Some(seq)) => Some(seq),
        Some(None) => return Ok(about("after", ApiError::BadRequest("no such item".into()))),
    };
    let store = gateway.runtime().store().as_ref();
    let last = last_seq(store, &key).await?;
    let items = match query.order.as_deref().unwrap_or("desc") {
        "asc" => items_forward(store, &key, after.map_or(1, |s| s + 1), limit + 1).await?,
        "desc" => {
            let through = after.map_or(last, |s| s.saturating_sub(1).min(last));
            items_backward(store, &key, through, limit + 1).await?
        }
        _ => {
            let error = ApiError::BadRequest("order must be `asc` or `desc`".into());
            return Ok(about("order", error));
        }
    };
    Ok(Json(ItemList::of(items, limit)).into_response())
}

/// Adds messages to the conversation without running a turn: the next response sees them.
#[utoipa::path(post, path = "/v1/conversations/{conversation}/items", tag = "openai",
    params(ConversationPath), request_body = AddBody,
    responses((status = 200, body = ItemList), Refusals))]
pub(crate) async fn add_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(conversation): ApiPath<String>,
    ApiJson(body): ApiJson<AddBody>,
) -> Result<Response, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    if body.items.is_empty() || body.items.len() > MAX_ITEMS {
        let error = ApiError::BadRequest(format!("give 1 to {MAX_ITEMS} items"));
        return Ok(about("items", error));
    }
    let count = body.items.len();
    let entries = match entries_of(body.items) {
        Ok(entries) => entries,
        Err(error) => return Ok(about("items", error)),
    };
    let runtime = gateway.runtime();
    // Appending creates a session: only an existing conversation takes items.
    last_seq(runtime.store().as_ref(), &key).await?;
    let first = runtime.append(&key, entries, Default::default()).await?;
    let items = items_forward(runtime.store().as_ref(), &key, first, count).await?;
    Ok(Json(ItemList::of(items, count)).into_response())
}

/// One item.
#[utoipa::path(get, path = "/v1/conversations/{conversation}/items/{item}", tag = "openai",
    params(ItemPath), responses((status = 200, body = Object), Refusals))]
pub(crate) async fn get_item(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath((conversation, item)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let key = conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    let missing = || ApiError::NotFound(format!("no item {item} in conversation {conversation}"));
    let seq = seq_of(&item).ok_or_else(missing)?;
    let events = gateway
        .runtime()
        .store()
        .read_events(&key, seq, 1)
        .await
        .map_err(|err| Error::store(&key, err))?;
    events
        .first()
        .filter(|event| event.seq == seq)
        .and_then(item_of)
        .filter(|found| found["id"] == item)
        .map(Json)
        .ok_or_else(missing)
}

/// Refused: a conversation's items are its session's log, which only grows.
#[utoipa::path(delete, path = "/v1/conversations/{conversation}/items/{item}", tag = "openai",
    params(ItemPath), responses((status = 409, description = "`append_only`: never deleted",
        body = crate::http::error::ErrorBody), Refusals))]
pub(crate) async fn delete_item(
    caller: Caller,
    headers: HeaderMap,
    ApiPath((conversation, _item)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    conversation_key(&acting_user(&caller, &headers)?, &conversation)?;
    Err(ApiError::AppendOnly(
        "a conversation's items are its session's log, which only grows: an item cannot be \
         deleted. Delete the conversation, or fork its session before the item \
         (POST /v1/sessions/{user}/{session}/fork with at_seq)"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Author;

    #[test]
    fn item_ids_name_their_seq() {
        assert_eq!(seq_of("msg_7"), Some(7));
        assert_eq!(seq_of("fco_12"), Some(12));
        for bad in [
            "msg_0",
            "msg_",
            "x_3",
            "msg_-1",
            "msg3",
            "msg_99999999999999999999",
        ] {
            assert_eq!(seq_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_messages_and_tool_events_are_items() {
        let input = Event::new(
            3,
            Author::User,
            0,
            EventKind::UserInput {
                text: "hi".into(),
                disposition: Default::default(),
            },
        );
        let item = item_of(&input).unwrap();
        assert_eq!(item["id"], "msg_3");
        assert_eq!(item["role"], "user");
        assert_eq!(item["content"][0]["text"], "hi");
        let note = Event::new(4, Author::System, 0, EventKind::Note { text: "n".into() });
        assert!(item_of(&note).is_none());
    }

    #[test]
    fn messages_of_text_parts_are_read_and_others_refused() {
        let item: InputItem = serde_json::from_value(json!({
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]
        }))
        .unwrap();
        assert_eq!(item.text().unwrap(), ("user", "a\n\nb".to_owned()));
        let image: InputItem = serde_json::from_value(json!({
            "role": "user", "content": [{"type": "input_image", "image_url": "x"}]
        }))
        .unwrap();
        assert!(image.text().is_err());
        let system: InputItem =
            serde_json::from_value(json!({"role": "system", "content": "be brief"})).unwrap();
        assert!(entries_of(vec![system]).is_err());
    }

    #[test]
    fn tool_output_items_are_refused_saying_why() {
        let output: InputItem = serde_json::from_value(json!({
            "type": "function_call_output", "call_id": "call_1", "output": "42"
        }))
        .unwrap();
        let refusal = output.text().unwrap_err().to_string();
        assert!(refusal.contains("calls its tools itself"), "{refusal}");
        let empty: InputItem = serde_json::from_value(json!({"role": "user"})).unwrap();
        assert!(empty.text().unwrap_err().to_string().contains("content"));
        let nobody: InputItem = serde_json::from_value(json!({"content": "hi"})).unwrap();
        assert!(nobody.text().unwrap_err().to_string().contains("role"));
    }
}
