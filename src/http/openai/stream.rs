//! A streamed response: the turn's chunks as OpenAI's typed events, each numbered by
//! `sequence_number` — `response.created`, `response.in_progress`,
//! `response.output_item.added`, `response.content_part.added`, `response.output_text.delta`…,
//! `response.output_text.done`, `response.content_part.done`, `response.output_item.done`, then
//! `response.completed` (or `response.incomplete` when the turn was cut short, or
//! `response.failed` with its error).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};

use super::responses::{finished, message, Extra, Shape, Tracked};
use crate::http::error::ApiError;
use crate::key::SessionKey;
use crate::store::Store;
use crate::stream::{StreamEvent, TurnStream};

/// What a streamed response needs besides its turn's stream.
pub(crate) struct Started {
    pub shape: Shape,
    /// Kept until the stream ends: `cancel` reaches the turn through it.
    pub tracked: Tracked,
    pub store: Arc<dyn Store>,
    pub key: SessionKey,
}

/// The events' state: what was sent so far.
struct Emitter {
    started: Started,
    stream: TurnStream,
    /// The next `sequence_number`.
    sequence: u64,
    /// The text streamed so far.
    text: String,
    /// The streamed message item's id.
    item: String,
    /// Events made and not yet sent.
    queue: VecDeque<Event>,
    /// Whether the last event is queued.
    ended: bool,
}

impl Emitter {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        let event = Event::default()
            .event(kind)
            .json_data(&data)
            .unwrap_or_else(|_| Event::default().event(kind));
        self.queue.push_back(event);
    }

    fn begin(&mut self) {
        let response = self
            .started
            .shape
            .object("in_progress", Vec::new(), Extra::default());
        self.push("response.created", json!({"response": response}));
        self.push("response.in_progress", json!({"response": response}));
        let item = json!({"type": "message", "id": self.item, "status": "in_progress",
            "role": "assistant", "content": []});
        self.push(
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        );
        self.push(
            "response.content_part.added",
            json!({"item_id": self.item, "output_index": 0, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
    }

    fn delta(&mut self, text: String) {
        self.push(
            "response.output_text.delta",
            json!({"item_id": self.item, "output_index": 0, "content_index": 0,
                "delta": text, "logprobs": []}),
        );
        self.text.push_str(&text);
    }

    /// Closes the message item with `text` (the stored output) in `status`.
    fn close_item(&mut self, text: &str, status: &str) {
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        self.push(
            "response.output_text.done",
            json!({"item_id": self.item, "output_index": 0, "content_index": 0,
                "text": text, "logprobs": []}),
        );
        self.push(
            "response.content_part.done",
            json!({"item_id": self.item, "output_index": 0, "content_index": 0, "part": part}),
        );
        let item = message(&self.item, text, status);
        self.push(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        );
    }

    async fn finish(&mut self, outcome: crate::call::Outcome) {
        let cancelled = self.started.tracked.cancelled();
        let mut response = finished(
            &self.started.shape,
            self.started.store.as_ref(),
            &self.started.key,
            &outcome,
            cancelled,
        )
        .await;
        let status = response["status"]
            .as_str()
            .unwrap_or("completed")
            .to_owned();
        let item_status = if status == "completed" {
            "completed"
        } else {
            "incomplete"
        };
        self.close_item(&outcome.output, item_status);
        // The streamed item keeps the id the stream gave it.
        response["output"] = json!([message(&self.item, &outcome.output, item_status)]);
        let kind = match status.as_str() {
            "completed" => "response.completed",
            _ => "response.incomplete",
        };
        self.push(kind, json!({"response": response}));
    }

    fn fail(&mut self, error: &ApiError) {
        let body = error.body();
        let detail = json!({
            "code": body["error"]["code"],
            "message": body["error"]["message"],
        });
        let extra = Extra {
            error: Some(detail),
            ..Extra::default()
        };
        let response = self.started.shape.object("failed", Vec::new(), extra);
        self.push("response.failed", json!({"response": response}));
    }
}

/// The turn's events as server-sent events. The request timeout bounds the wait for each next
/// event (as on `POST …/turns`): a reply that keeps streaming is never cut; one silent for the
/// whole timeout ends with `response.failed` (`timeout`), and the turn goes on.
pub(crate) fn response_events(started: Started, stream: TurnStream, timeout: Duration) -> Response {
    let item = format!("msg_{}", &started.tracked_id()[5..]);
    let mut emitter = Emitter {
        started,
        stream,
        sequence: 0,
        text: String::new(),
        item,
        queue: VecDeque::new(),
        ended: false,
    };
    emitter.begin();
    let events = futures::stream::unfold(emitter, move |mut emitter| async move {
        loop {
            if let Some(event) = emitter.queue.pop_front() {
                return Some((Ok::<_, Infallible>(event), emitter));
            }
            if emitter.ended {
                return None;
            }
            match tokio::time::timeout(timeout, emitter.stream.next()).await {
                Ok(Some(StreamEvent::Chunk(text))) => emitter.delta(text),
                Ok(Some(StreamEvent::Outcome(Ok(outcome)))) => {
                    emitter.started.tracked.finish();
                    emitter.finish(outcome).await;
                    emitter.ended = true;
                }
                Ok(Some(StreamEvent::Outcome(Err(error)))) => {
                    emitter.started.tracked.finish();
                    emitter.fail(&ApiError::from(error).of_turn());
                    emitter.ended = true;
                }
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(_) => {
                    emitter.fail(&ApiError::Timeout {
                        after: timeout,
                        interrupted: false,
                    });
                    emitter.ended = true;
                }
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

impl Started {
    /// The response's id.
    fn tracked_id(&self) -> &str {
        &self.shape.id
    }
}
