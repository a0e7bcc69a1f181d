//! Reading a response back: finding its turn in its conversation's log (by the request id its
//! input carries), and the routes that answer with it — retrieve, cancel, input items.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};

use super::super::items::{item_of, last_seq, ItemList};
use super::super::{acting_user, conversation_key, now_seconds, seconds, Metadata, ResponseId};
use super::object::{item_status, message, reason_name, Extra, Shape};
use super::ResponsePath;
use crate::error::Error;
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::ApiPath;
use crate::http::gateway::Gateway;
use crate::key::SessionKey;
use crate::state::{Event, EventKind, InputDisposition, OutputStatus, Seq};
use crate::store::Store;

/// Events read at a time while looking for a response in its conversation's log.
const READ_CHUNK: usize = 200;

/// How far back from a conversation's newest event a response is looked for: older ones are
/// answered 404 rather than reading a long log whole.
const MAX_SCAN: Seq = 20_000;

/// A response found in its conversation's log.
pub(crate) struct Found {
    /// Its input.
    pub input: Event,
    /// What answered it: the turn's output or failure, if it is stored yet.
    pub answer: Option<Event>,
}

/// Looks for the turn whose input carries `turn` as its request id, from the newest event
/// back (at most [`MAX_SCAN`] events).
pub(crate) async fn find(
    store: &dyn Store,
    key: &SessionKey,
    turn: &str,
) -> Result<Option<Found>, ApiError> {
    let store_error = |err| ApiError::from(Error::store(key, err));
    let Ok(last) = last_seq(store, key).await else {
        return Ok(None);
    };
    let mut end = last;
    let mut input = None;
    while input.is_none() && end > 0 && last - end < MAX_SCAN {
        let from = end.saturating_sub(READ_CHUNK as Seq - 1).max(1);
        let events = store
            .read_events(key, from, (end - from + 1) as usize)
            .await
            .map_err(store_error)?;
        input = events.into_iter().rev().find(|event| {
            matches!(event.kind, EventKind::UserInput { .. })
                && event.request_id.as_deref() == Some(turn)
        });
        end = from - 1;
    }
    let Some(input) = input else { return Ok(None) };
    let disposition = match &input.kind {
        EventKind::UserInput { disposition, .. } => *disposition,
        _ => InputDisposition::Answered,
    };
    if disposition == InputDisposition::Superseded {
        // It never ran: nothing answers it but its own marking.
        return Ok(Some(Found {
            input,
            answer: None,
        }));
    }
    // The answer follows its input, after the turn's tool events (and, for a message merged
    // into a later turn, after the other messages of that turn).
    let mut next = input.seq + 1;
    loop {
        let events = store
            .read_events(key, next, READ_CHUNK)
            .await
            .map_err(store_error)?;
        let Some(last) = events.last() else {
            return Ok(Some(Found {
                input,
                answer: None,
            }));
        };
        next = last.seq + 1;
        let answer = events.into_iter().find(|event| {
            matches!(
                event.kind,
                EventKind::AgentOutput { .. } | EventKind::TurnFailed { .. }
            ) || (disposition != InputDisposition::Merged
                && matches!(event.kind, EventKind::UserInput { .. }))
        });
        if let Some(answer) = answer {
            let answer = (!matches!(answer.kind, EventKind::UserInput { .. })).then_some(answer);
            return Ok(Some(Found { input, answer }));
        }
    }
}

/// The response object of a stored turn.
fn stored(shape: &Shape, found: &Found) -> Value {
    if let EventKind::UserInput {
        disposition: InputDisposition::Superseded,
        ..
    } = found.input.kind
    {
        let extra = Extra {
            incomplete: Some("superseded".into()),
            seq: Some(found.input.seq),
            ..Extra::default()
        };
        return shape.object("incomplete", Vec::new(), extra);
    }
    let Some(answer) = &found.answer else {
        return shape.object("in_progress", Vec::new(), Extra::default());
    };
    let id = format!("msg_{}", answer.seq);
    match &answer.kind {
        EventKind::AgentOutput {
            text,
            status,
            usage,
            ..
        } => {
            let (status, incomplete) = match status {
                OutputStatus::Final => ("completed", None),
                OutputStatus::Interrupted(reason) => ("incomplete", Some(reason_name(*reason))),
            };
            let extra = Extra {
                usage: usage.as_ref().map(|u| (u.input_tokens, u.output_tokens)),
                incomplete,
                error: None,
                seq: Some(answer.seq),
            };
            shape.object(status, vec![message(&id, text, item_status(status))], extra)
        }
        EventKind::TurnFailed { code, reason, .. } => {
            let extra = Extra {
                error: Some(json!({"code": code, "message": reason})),
                seq: Some(answer.seq),
                ..Extra::default()
            };
            shape.object("failed", Vec::new(), extra)
        }
        _ => shape.object("in_progress", Vec::new(), Extra::default()),
    }
}

/// Reads the response `id` as the caller may see it.
async fn lookup(
    gateway: &Gateway,
    caller: &Caller,
    headers: &HeaderMap,
    id: &str,
) -> Result<(Shape, Option<Found>), ApiError> {
    let missing = || ApiError::NotFound(format!("no response {id}"));
    let parsed = ResponseId::parse(id).ok_or_else(missing)?;
    let key = conversation_key(&acting_user(caller, headers)?, &parsed.conversation)
        .map_err(|_| missing())?;
    let found = find(gateway.runtime().store().as_ref(), &key, &parsed.turn).await?;
    let running = gateway.responses().lock().contains_key(id);
    if found.is_none() && !running {
        return Err(missing());
    }
    let created_at = found
        .as_ref()
        .map_or_else(now_seconds, |f| seconds(f.input.at_ms));
    let shape = Shape {
        id: id.to_owned(),
        conversation: parsed.conversation,
        created_at,
        model: gateway.default_model().to_owned(),
        previous: None,
        instructions: None,
        metadata: Metadata::new(),
    };
    Ok((shape, found))
}

/// The response, from its conversation's log (`in_progress` while its turn runs here).
#[utoipa::path(get, path = "/v1/responses/{response}", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), crate::http::schema::Refusals))]
pub(crate) async fn get_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let (shape, found) = lookup(&gateway, &caller, &headers, &id).await?;
    Ok(Json(match found {
        Some(found) => stored(&shape, &found),
        None => shape.object("in_progress", Vec::new(), Extra::default()),
    }))
}

/// Interrupts the response's turn, if it runs here; answers the response once its turn is
/// recorded (with the partial output), or as it is when the wait ends first.
#[utoipa::path(post, path = "/v1/responses/{response}/cancel", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), crate::http::schema::Refusals))]
pub(crate) async fn cancel_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    // Checked first: a token must not cancel a response it cannot read.
    lookup(&gateway, &caller, &headers, &id).await?;
    let running = gateway.responses().lock().get(&id).cloned();
    if let Some(running) = &running {
        running.cancel.cancel();
        let _ = tokio::time::timeout(
            gateway.config().request_timeout,
            running.finished.cancelled(),
        )
        .await;
    }
    let (shape, found) = lookup(&gateway, &caller, &headers, &id).await?;
    let mut object = match found {
        Some(found) => stored(&shape, &found),
        None => shape.object("in_progress", Vec::new(), Extra::default()),
    };
    if running.is_some() && object["status"] == "incomplete" {
        object["status"] = json!("cancelled");
        object["incomplete_details"] = Value::Null;
    }
    Ok(Json(object))
}

/// The response's input, as items.
#[utoipa::path(get, path = "/v1/responses/{response}/input_items", tag = "openai",
    params(ResponsePath), responses((status = 200, body = ItemList), crate::http::schema::Refusals))]
pub(crate) async fn response_input_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ItemList>, ApiError> {
    let (_, found) = lookup(&gateway, &caller, &headers, &id).await?;
    let items: Vec<Value> = found.iter().filter_map(|f| item_of(&f.input)).collect();
    let count = items.len().max(1);
    Ok(Json(ItemList::of(items, count)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Author;
    use crate::store::InMemoryStore;

    fn input(seq: Seq, turn: &str, disposition: InputDisposition) -> Event {
        let kind = EventKind::UserInput {
            text: turn.to_owned(),
            disposition,
        };
        let mut event = Event::new(seq, Author::User, 0, kind);
        event.request_id = Some(turn.to_owned());
        event
    }

    fn output(seq: Seq, text: &str) -> Event {
        let kind = EventKind::AgentOutput {
            text: text.to_owned(),
            status: OutputStatus::Final,
            duration_ms: 0,
            usage: None,
        };
        Event::new(seq, Author::Agent, 0, kind)
    }

    fn shape() -> Shape {
        Shape {
            id: "resp_x".into(),
            conversation: "c".into(),
            created_at: 0,
            model: "m".into(),
            previous: None,
            instructions: None,
            metadata: Default::default(),
        }
    }

    /// A superseded message is answered by its own marking, and a merged one by the output of
    /// the turn it was merged into, past the other messages of that turn.
    #[tokio::test]
    async fn superseded_and_merged_responses_are_found_with_their_answers() {
        let store = InMemoryStore::new();
        let key = SessionKey::new("u", "c").unwrap();
        let log = [
            input(1, "resp_a", InputDisposition::Superseded),
            input(2, "resp_b", InputDisposition::Merged),
            input(3, "resp_c", InputDisposition::Answered),
            output(4, "b and c"),
        ];
        store.append(&key, 0, &log).await.unwrap();

        let superseded = find(&store, &key, "resp_a").await.unwrap().unwrap();
        let object = stored(&shape(), &superseded);
        assert_eq!(object["status"], "incomplete");
        assert_eq!(object["incomplete_details"]["reason"], "superseded");
        assert_eq!(object["turnstile"]["seq"], 1, "its own input");

        let merged = find(&store, &key, "resp_b").await.unwrap().unwrap();
        let object = stored(&shape(), &merged);
        assert_eq!(object["status"], "completed", "{object}");
        assert_eq!(object["output"][0]["content"][0]["text"], "b and c");
        assert_eq!(object["turnstile"]["seq"], 4);

        let answered = find(&store, &key, "resp_c").await.unwrap().unwrap();
        assert_eq!(stored(&shape(), &answered)["turnstile"]["seq"], 4);
    }
}
