//! A streamed response: its turn's chunks and tool calls as OpenAI's typed events, each
//! numbered by `sequence_number` — `response.created`, `response.in_progress`, then for each
//! output item as it comes `response.output_item.added`, its content (`response.content_part.added`,
//! `response.output_text.delta`…, `response.output_text.done`, `response.content_part.done`, or a
//! function call's `response.function_call_arguments.done`) and `response.output_item.done`,
//! then `response.completed` (or `response.incomplete` when the turn was cut short, or
//! `response.failed` with its error).

use std::collections::{HashMap, VecDeque};

use std::io::Write;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::items::{arguments_text, message, refusal as refusal_item, result_text};
use super::object::ResponseObject;
use crate::error::Error;
use crate::stream::StreamEvent;

/// What the task driving a response's turn hands its stream. Small (the rare and large parts
/// boxed): a channel of these keeps a block of them for every streamed response.
pub(crate) enum Driven {
    /// A chunk of the turn's text.
    Chunk(String),
    /// A tool event of the turn.
    Tool(Box<StreamEvent>),
    /// The response's final object once its turn is stored, or why it failed.
    Done(Box<Result<ResponseObject, Error>>),
}

impl Driven {
    /// A turn's event, as the stream takes it.
    pub(crate) fn turn(event: StreamEvent) -> Self {
        match event {
            StreamEvent::Chunk(text) => Self::Chunk(text),
            other => Self::Tool(Box::new(other)),
        }
    }
}

/// One event of a streamed response.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResponseEvent {
    /// A typed event: its `type` (also the server-sent event's name) and its data, JSON text
    /// on one line that carries `type` and `sequence_number`.
    Typed {
        /// `response.created`, `response.output_text.delta`…
        kind: &'static str,
        /// The event's JSON.
        data: String,
    },
    /// The turn failed with `Error`: the last event. Answer it with
    /// [`ResponseEvents::failure`], which numbers it.
    Failed(Error),
}

/// A streamed response's events (see the module's documentation). Read them with
/// [`ResponseEvents::next`]; dropping them leaves the response running (it is a resource:
/// retrieve and cancel still reach it).
#[derive(Debug)]
pub struct ResponseEvents {
    /// The response as created.
    created: ResponseObject,
    from: mpsc::Receiver<Driven>,
    /// The next `sequence_number`.
    sequence: u64,
    /// Events made and not yet read.
    queue: VecDeque<ResponseEvent>,
    /// Whether the last event is queued.
    ended: bool,
    /// The items emitted so far, as they stand, in `output_index` order.
    items: Vec<Value>,
    /// The message item's index, once opened.
    message: Option<usize>,
    /// The message item's id.
    message_id: String,
    /// The text streamed so far.
    text: String,
    /// The output index of each streamed tool item, by call id.
    tools: HashMap<String, usize>,
}

impl ResponseEvents {
    pub(crate) fn new(created: ResponseObject, from: mpsc::Receiver<Driven>) -> Self {
        let message_id = created.id().strip_prefix("resp_").map_or_else(
            || "msg_stream".to_owned(),
            |rest| format!("msg_{}", &rest[..rest.len().min(32)]),
        );
        let mut events = Self {
            created,
            from,
            sequence: 0,
            queue: VecDeque::new(),
            ended: false,
            items: Vec::new(),
            message: None,
            message_id,
            text: String::new(),
            tools: HashMap::new(),
        };
        let created = events.created.clone();
        events.push("response.created", &WithResponse { response: &created });
        events.push("response.in_progress", &WithResponse { response: &created });
        events
    }

    /// The next event if one is ready now, without waiting: a caller that writes events in
    /// batches takes the ones made together (the final ones come at once).
    pub fn ready(&mut self) -> Option<ResponseEvent> {
        self.queue.pop_front()
    }

    /// The next event; `None` after the last.
    pub async fn next(&mut self) -> Option<ResponseEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            match self.from.recv().await {
                Some(Driven::Chunk(text)) => self.delta(text),
                Some(Driven::Tool(event)) => self.turn(*event),
                Some(Driven::Done(done)) => {
                    match *done {
                        Ok(object) => self.finish(object),
                        Err(error) => self.queue.push_back(ResponseEvent::Failed(error)),
                    }
                    self.ended = true;
                }
                None => return None,
            }
        }
    }

    /// The `response.failed` event that ends the stream, with `code` and `message` as its
    /// error: for a [`ResponseEvent::Failed`], or a wait that ran out.
    pub fn failure(&mut self, code: &str, message: &str) -> ResponseEvent {
        self.ended = true;
        self.queue.clear();
        let response = self.created.failing(code, message);
        let data = self.numbered(
            "response.failed",
            &WithResponse {
                response: &response,
            },
        );
        ResponseEvent::Typed {
            kind: "response.failed",
            data,
        }
    }

    /// The event's JSON: `type` and `sequence_number`, then the fields of `body` (an object).
    fn numbered(&mut self, kind: &str, body: &impl Serialize) -> String {
        let mut out = Vec::with_capacity(160);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        let _ = write!(out, "\",\"sequence_number\":{}", self.sequence);
        self.sequence += 1;
        let start = out.len();
        serde_json::to_writer(&mut out, body).expect("an event's body serializes");
        if out[start..] == *b"{}" {
            out.truncate(start);
            out.push(b'}');
        } else {
            out[start] = b',';
        }
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    fn push(&mut self, kind: &'static str, body: &impl Serialize) {
        let data = self.numbered(kind, body);
        self.queue.push_back(ResponseEvent::Typed { kind, data });
    }

    fn turn(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::Chunk(text) => self.delta(text),
            StreamEvent::ToolCall {
                call_id,
                name,
                arguments,
                server,
                for_caller,
            } => {
                let arguments = arguments_text(&arguments);
                match (server, for_caller) {
                    (Some(server), _) => {
                        let item = json!({"type": "mcp_call", "id": format!("mcp_{call_id}"),
                            "status": "in_progress", "server_label": server, "name": name,
                            "arguments": arguments, "output": null, "error": null});
                        let at = self.add_item(item);
                        self.tools.insert(call_id, at);
                    }
                    (None, true) => {
                        let id = format!("fc_{call_id}");
                        let item = json!({"type": "function_call", "id": id,
                            "status": "completed", "call_id": call_id, "name": name,
                            "arguments": arguments});
                        let at = self.add_item(item.clone());
                        self.push(
                            "response.function_call_arguments.done",
                            &json!({"item_id": id, "output_index": at, "arguments": arguments}),
                        );
                        self.push(
                            "response.output_item.done",
                            &json!({"output_index": at, "item": item}),
                        );
                    }
                    // The agent's own tools run inside the server: no output item.
                    (None, false) => {}
                }
            }
            StreamEvent::ToolResult {
                call_id,
                result,
                ok,
            } => {
                let Some(at) = self.tools.remove(&call_id) else {
                    return;
                };
                let item = &mut self.items[at];
                if ok {
                    item["output"] = json!(result_text(&result));
                    item["status"] = json!("completed");
                } else {
                    item["error"] = json!(result_text(&result));
                    item["status"] = json!("failed");
                }
                let item = item.clone();
                self.push(
                    "response.output_item.done",
                    &json!({"output_index": at, "item": item}),
                );
            }
            _ => {}
        }
    }

    /// Adds an output item (`response.output_item.added`); returns its index.
    fn add_item(&mut self, item: Value) -> usize {
        let at = self.items.len();
        self.items.push(item.clone());
        self.push(
            "response.output_item.added",
            &json!({"output_index": at, "item": item}),
        );
        at
    }

    /// Opens the message item, once, with a text part.
    fn open_message(&mut self) -> usize {
        self.open_message_with("output_text")
    }

    /// Opens the message item, once, its first part of `kind` (`output_text` or `refusal`).
    fn open_message_with(&mut self, kind: &str) -> usize {
        if let Some(at) = self.message {
            return at;
        }
        let item = json!({"type": "message", "id": self.message_id, "status": "in_progress",
            "role": "assistant", "content": []});
        let at = self.add_item(item);
        self.message = Some(at);
        let part = match kind {
            "refusal" => json!({"type": "refusal", "refusal": ""}),
            _ => json!({"type": "output_text", "text": "", "annotations": []}),
        };
        self.push(
            "response.content_part.added",
            &json!({"item_id": self.message_id, "output_index": at, "content_index": 0,
                "part": part}),
        );
        at
    }

    fn delta(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        let at = self.open_message();
        self.push(
            "response.output_text.delta",
            &json!({"item_id": self.message_id, "output_index": at, "content_index": 0,
                "delta": text, "logprobs": []}),
        );
        self.text.push_str(&text);
    }

    /// Ends the message's text part (index 0) with `text`.
    fn close_text_part(&mut self, at: usize, text: &str) {
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        self.push(
            "response.output_text.done",
            &json!({"item_id": self.message_id, "output_index": at, "content_index": 0,
                "text": text, "logprobs": []}),
        );
        self.push(
            "response.content_part.done",
            &json!({"item_id": self.message_id, "output_index": at, "content_index": 0,
                "part": part}),
        );
    }

    /// Closes the message item with the stored text in `status`.
    fn close_message(&mut self, text: &str, status: &str) {
        let at = self.open_message();
        self.close_text_part(at, text);
        let item = message(&self.message_id, text, status);
        self.items[at] = item.clone();
        self.push(
            "response.output_item.done",
            &json!({"output_index": at, "item": item}),
        );
    }

    /// Closes the message with the model's refusal: a `refusal` part after any text streamed
    /// (`response.refusal.delta`, `response.refusal.done`), the item `completed`.
    fn refuse(&mut self, refusal: &str) {
        let streamed = self.message.is_some();
        let at = self.open_message_with("refusal");
        let mut content = Vec::new();
        if streamed {
            let text = std::mem::take(&mut self.text);
            self.close_text_part(at, &text);
            content.push(json!({"type": "output_text", "text": text, "annotations": []}));
            self.push(
                "response.content_part.added",
                &json!({"item_id": self.message_id, "output_index": at, "content_index": 1,
                    "part": {"type": "refusal", "refusal": ""}}),
            );
        }
        let index = content.len();
        let part = json!({"type": "refusal", "refusal": refusal});
        for (kind, field) in [
            ("response.refusal.delta", "delta"),
            ("response.refusal.done", "refusal"),
        ] {
            self.push(
                kind,
                &json!({"item_id": self.message_id, "output_index": at, "content_index": index,
                    field: refusal}),
            );
        }
        self.push(
            "response.content_part.done",
            &json!({"item_id": self.message_id, "output_index": at, "content_index": index,
                "part": part}),
        );
        content.push(part);
        let mut item = refusal_item(&self.message_id, refusal);
        item["content"] = Value::Array(content);
        self.items[at] = item.clone();
        self.push(
            "response.output_item.done",
            &json!({"output_index": at, "item": item}),
        );
    }

    /// The final events, from the stored response's object: its tool items the stream did not
    /// carry are added, its message closed with the stored text, and the object's output is
    /// the stream's items.
    fn finish(&mut self, object: ResponseObject) {
        let status = object.status();
        let item_status = if status == "completed" {
            "completed"
        } else {
            "incomplete"
        };
        let output = object.output();
        for item in &output {
            let id = &item["id"];
            let streamed = self.items.iter().any(|i| i["id"] == *id);
            if item["type"] != "message" && !streamed {
                let at = self.add_item(item.clone());
                self.push(
                    "response.output_item.done",
                    &json!({"output_index": at, "item": item}),
                );
            }
        }
        for (_, at) in std::mem::take(&mut self.tools) {
            // A call whose result the stream never carried: as the stored object has it.
            if let Some(stored) = output.iter().find(|i| i["id"] == self.items[at]["id"]) {
                self.items[at] = stored.clone();
            }
            let item = self.items[at].clone();
            self.push(
                "response.output_item.done",
                &json!({"output_index": at, "item": item}),
            );
        }
        let message = output.iter().find(|i| i["type"] == "message");
        let refused = message
            .and_then(|i| i["content"][0]["refusal"].as_str())
            .map(str::to_owned);
        let said = message
            .and_then(|i| i["content"][0]["text"].as_str())
            .map(str::to_owned);
        if let Some(refusal) = refused {
            self.refuse(&refusal);
        } else if let Some(text) = said {
            self.close_message(&text, item_status);
        } else if self.message.is_some() {
            let text = std::mem::take(&mut self.text);
            self.close_message(&text, item_status);
        }
        let object = object.with_output(std::mem::take(&mut self.items));
        let kind = match status {
            "completed" => "response.completed",
            "failed" => "response.failed",
            _ => "response.incomplete",
        };
        self.push(kind, &WithResponse { response: &object });
    }
}

/// An event's body that carries the response object.
#[derive(Serialize)]
struct WithResponse<'a> {
    response: &'a ResponseObject,
}
