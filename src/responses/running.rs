//! Responses as resources: a response outlives the request that made it. A streamed or
//! background one runs on a task of its own; a plain one is waited on by its request, and on
//! a task of its own once that request goes away (see [`Finished`]). Until the turn's outcome
//! is in, the response is in the service's map of running responses, where `retrieve` and
//! `cancel` find it from any request. Afterwards both read it from the session's log, where
//! its message carries the response's id as its request id.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use self::finished::Finished;
use self::finished::Unadmitted;

use super::events::{Driven, ResponseEvents};
use super::items::item_of;
use super::object::{ResponseObject, Shape};
use super::request::ResponseRequest;
use super::{
    conversation_key, now_seconds, seconds, Metadata, ResponseId, Responses, ResponsesError,
};
use crate::agent::{
    INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, PARALLEL_TOOL_CALLS_ATTRIBUTE,
    RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE, TOOLS_ATTRIBUTE, TOOL_CHOICE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
use crate::call::{Attributes, CallOptions};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::Fate;
use crate::stream::{StreamEvent, TurnStream};

mod finished;

/// Events a streamed response's reader may fall behind by before its turn waits for it.
const EVENTS_BUFFER: usize = 64;

/// How long a turn waits for a streaming reader that fell that far behind before it goes on
/// without it (the response runs to its end, and retrieve finds it): a reader that stopped
/// reading must not hold a turn, nor the response's place in the map of running ones.
const READER_WAIT: Duration = Duration::from_secs(30);

/// A response whose turn has not ended.
pub(crate) struct Running {
    key: SessionKey,
    shape: Arc<Shape>,
    /// Interrupts the turn (`cancel`).
    cancel: CancellationToken,
    /// Cancelled once the turn's outcome is in.
    done: CancellationToken,
    /// The final object, once the outcome is in.
    last: Mutex<Option<ResponseObject>>,
}

/// What creating a response gives.
#[derive(Debug)]
#[non_exhaustive]
pub enum Created {
    /// `background`: the response as created; retrieve polls it.
    Background(ResponseObject),
    /// The finished response, once its turn is stored.
    Finished(Finished),
    /// `stream`: the response's events.
    Events(ResponseEvents),
}

/// Where the answer goes.
enum Sink {
    Background,
    Events(mpsc::Sender<Driven>),
}

impl Responses {
    /// Creates a response for `user`: refuses what it cannot act on (naming the field), finds
    /// the session it runs in (the conversation named, the previous response's — or a fork of
    /// it when that response is not the newest —, or a new one), and admits its turn. With
    /// `idempotency_key`, a retry names the same response and the turn runs once.
    pub async fn create(
        &self,
        user: &str,
        request: ResponseRequest,
        idempotency_key: Option<&str>,
    ) -> Result<Created, ResponsesError> {
        let attributes = self.attributes(&request)?;
        if !request.agent_tools.is_empty() {
            let taken = self.runtime().agent_tool_names();
            let clash = request.agent_tools.iter().find_map(|tool| {
                let name = tool.pointer("/function/name")?.as_str()?;
                taken.iter().any(|t| t == name).then_some(name)
            });
            if let Some(name) = clash {
                return Err(ResponsesError::invalid(
                    "tools",
                    format!("{name:?} is a tool of the server's own; give yours another name"),
                ));
            }
        }
        let seed = idempotency_key.map(|k| format!("{user}\0{k}"));
        let key = self.where_to_run(user, &request, seed.as_deref()).await?;
        let id = ResponseId::new(key.session_id(), seed.as_deref());
        let mut shape = Shape::of(
            &request,
            request
                .model
                .clone()
                .unwrap_or_else(|| self.inner.default_model.clone()),
        );
        shape.id = id.to_string();
        shape.conversation = key.session_id().to_owned();
        shape.created_at = now_seconds();
        let shape = Arc::new(shape);
        let (running, owner) = self.enter(&shape, &key);
        let mut options = CallOptions::default();
        if idempotency_key.is_some() {
            options = options.with_fingerprint(request.fingerprint.clone());
        }
        if request.conversation.is_some() {
            options = options.existing_only();
        }
        let options = options
            .with_request_id(id.turn.clone())
            .with_cancellation(running.cancel.clone())
            .with_attributes(Arc::new(attributes) as Attributes)
            .with_preceding(request.brought);
        // A response that is neither streamed nor in the background only waits for its
        // outcome: the plain call, with no stream to carry, waited on by its request (and on
        // a task of its own should that request go away: see `Finished`).
        if !request.stream && !request.background {
            let (service, runtime) = (self.clone(), self.runtime().clone());
            let work = async move {
                let answer = match runtime.admit(&key, request.message, options).await {
                    Ok(admitted) => admitted.outcome().await,
                    Err(error) => Err(error),
                };
                if matches!(answer, Err(Error::NotFound { .. })) {
                    // The conversation does not exist: the session its turn woke holds nothing.
                    runtime.passivate(&key);
                }
                service.ended(answer, &running, owner)
            };
            return Ok(Created::Finished(Finished::start(Box::pin(work)).await));
        }
        // The others are admitted before they are answered, so that a refusal (a busy
        // session, a drain) is the request's answer, not a response that failed later.
        let unadmitted = Unadmitted {
            service: self,
            running: &running,
            owner,
        };
        let stream = self
            .runtime()
            .call_streaming(&key, request.message, options)
            .await?;
        std::mem::forget(unadmitted);
        let created = match request.background {
            true => shape.queued(),
            false => shape.in_progress(),
        };
        // A streamed response in the background streams too: it runs on whether its reader
        // stays or not, as every response does.
        let (sink, answer) = if request.stream {
            let (tx, rx) = mpsc::channel(EVENTS_BUFFER);
            (
                Sink::Events(tx),
                Created::Events(ResponseEvents::new(created, rx)),
            )
        } else {
            (Sink::Background, Created::Background(created))
        };
        let service = self.clone();
        tokio::spawn(async move { service.drive(stream, running, owner, sink).await });
        Ok(answer)
    }

    /// The turn attributes a request sets, once the agent is known to act on each.
    fn attributes(
        &self,
        request: &ResponseRequest,
    ) -> Result<HashMap<String, Value>, ResponsesError> {
        let acts = self.runtime().agent_attributes();
        let mut attributes = HashMap::new();
        let mut set = |param: &str, attribute: &str, value: Option<Value>| {
            let Some(value) = value else { return Ok(()) };
            if !acts.contains(&attribute) {
                return Err(ResponsesError::invalid(
                    param,
                    format!(
                        "{param} is not supported by this server's agent, which would not act \
                         on it; leave it out (serve --agent openai acts on it)"
                    ),
                ));
            }
            attributes.insert(attribute.to_owned(), value);
            Ok(())
        };
        let text = |v: &Option<String>| v.clone().map(Value::String);
        set(
            "instructions",
            INSTRUCTIONS_ATTRIBUTE,
            text(&request.instructions),
        )?;
        let tools =
            (!request.agent_tools.is_empty()).then(|| Value::from(request.agent_tools.clone()));
        set("tools", TOOLS_ATTRIBUTE, tools)?;
        let choice = request.tool_choice.as_ref().map(|(_, agent)| agent.clone());
        set("tool_choice", TOOL_CHOICE_ATTRIBUTE, choice)?;
        let parallel = request.parallel_tool_calls.map(Value::from);
        set(
            "parallel_tool_calls",
            PARALLEL_TOOL_CALLS_ATTRIBUTE,
            parallel,
        )?;
        let format = request.text.as_ref().map(|(_, agent)| agent.clone());
        set("text", RESPONSE_FORMAT_ATTRIBUTE, format)?;
        set(
            "temperature",
            TEMPERATURE_ATTRIBUTE,
            request.temperature.map(Value::from),
        )?;
        set("top_p", TOP_P_ATTRIBUTE, request.top_p.map(Value::from))?;
        let most = request.max_output_tokens.map(Value::from);
        set("max_output_tokens", MAX_TOKENS_ATTRIBUTE, most)?;
        Ok(attributes)
    }

    /// Puts the response in the map of running ones; a retry of one still running shares its
    /// entry (and its cancel). Returns whether this request made the entry.
    fn enter(&self, shape: &Arc<Shape>, key: &SessionKey) -> (Arc<Running>, bool) {
        let mut running = self.inner.running.lock();
        if let Some(existing) = running.get(&shape.id) {
            return (existing.clone(), false);
        }
        let entry = Arc::new(Running {
            key: key.clone(),
            shape: shape.clone(),
            cancel: CancellationToken::new(),
            done: CancellationToken::new(),
            last: Mutex::new(None),
        });
        running.insert(shape.id.clone(), entry.clone());
        (entry, true)
    }

    fn leave(&self, id: &str, entry: &Arc<Running>) {
        let mut running = self.inner.running.lock();
        if running.get(id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            running.remove(id);
        }
    }

    /// Runs the turn to its end, whoever still listens: its events go to a streaming reader
    /// while it reads, its object to the request that waits for it; then the entry goes.
    async fn drive(self, mut stream: TurnStream, running: Arc<Running>, owner: bool, sink: Sink) {
        let mut events = match &sink {
            Sink::Events(tx) => Some(tx.clone()),
            _ => None,
        };
        let mut outcome = None;
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Outcome(answer) => {
                    outcome = Some(answer);
                    break;
                }
                event => {
                    if let Some(tx) = &events {
                        // A reader that went away, or stopped reading, leaves the turn running.
                        let sent = tokio::time::timeout(READER_WAIT, tx.send(Driven::turn(event)));
                        if !matches!(sent.await, Ok(Ok(()))) {
                            events = None;
                        }
                    }
                }
            }
        }
        let answer = outcome.unwrap_or_else(|| {
            Err(Error::SessionFailed {
                key: running.key.clone(),
            })
        });
        let sink = match (sink, events) {
            // The reader is gone: nobody waits for the end.
            (Sink::Events(_), None) => Sink::Background,
            (sink, _) => sink,
        };
        self.end(answer, &running, owner, sink).await;
    }

    /// The turn's outcome is in: the response's final object is kept for whoever asks while the
    /// entry lives, the entry goes, and the answer goes to whoever waits for it.
    async fn end(
        &self,
        answer: Result<crate::call::Outcome, Error>,
        running: &Arc<Running>,
        owner: bool,
        sink: Sink,
    ) {
        let object = self.ended(answer, running, owner);
        match sink {
            Sink::Events(tx) => {
                let _ = tx.send(Driven::Done(Box::new(object))).await;
            }
            Sink::Background => {}
        }
    }

    /// The response as its turn's outcome ended it; recorded for retrieve and cancel, and out
    /// of the map of running responses, by the request that made the entry.
    fn ended(
        &self,
        answer: Result<crate::call::Outcome, Error>,
        running: &Arc<Running>,
        owner: bool,
    ) -> Result<ResponseObject, Error> {
        let object = answer.map(|outcome| {
            let cancelled = running.cancel.is_cancelled();
            running.shape.finished(&outcome, cancelled)
        });
        // Only the request that made the entry speaks for the response: a retry sharing it
        // may be refused (another body, a drain) while the response itself runs on.
        if owner {
            *running.last.lock() = Some(match &object {
                Ok(object) => object.clone(),
                Err(error) => running
                    .shape
                    .failed(error.code(), &public_failure(error), None),
            });
            running.done.cancel();
            self.leave(&running.shape.id, running);
        }
        object
    }

    /// The response `id` as `user` may see it: while it runs, as it stands; then from its
    /// conversation's log.
    pub async fn retrieve(&self, user: &str, id: &str) -> Result<ResponseObject, ResponsesError> {
        let (key, turn) = self.named(user, id)?;
        if let Some(running) = self.running_entry(id, &key) {
            let last = running.last.lock().clone();
            return Ok(last.unwrap_or_else(|| running.shape.in_progress()));
        }
        self.stored(&key, id, &turn).await
    }

    /// Interrupts the response's turn if it runs (in this process), and answers the response
    /// once its turn is recorded with the partial output (`cancelled`), or as it stands when
    /// `wait` ends first. A finished response is answered as it is.
    pub async fn cancel(
        &self,
        user: &str,
        id: &str,
        wait: Duration,
    ) -> Result<ResponseObject, ResponsesError> {
        let (key, turn) = self.named(user, id)?;
        let Some(running) = self.running_entry(id, &key) else {
            return self.stored(&key, id, &turn).await;
        };
        running.cancel.cancel();
        let _ = tokio::time::timeout(wait, running.done.cancelled()).await;
        let last = running.last.lock().clone();
        Ok(last.unwrap_or_else(|| running.shape.in_progress()))
    }

    /// The response's input: the items it brought and its message.
    pub async fn input_items(&self, user: &str, id: &str) -> Result<Vec<Value>, ResponsesError> {
        let (key, turn) = self.named(user, id)?;
        let found = self.runtime().find_request(&key, &turn).await?;
        match found {
            Some(found) => Ok(found.events.iter().filter_map(item_of).collect()),
            None if self.running_entry(id, &key).is_some() => Ok(Vec::new()),
            None => Err(ResponsesError::not_found(format!("no response {id}"))),
        }
    }

    /// The session and turn id a response id names for `user` (a 404 for another's).
    fn named(&self, user: &str, id: &str) -> Result<(SessionKey, String), ResponsesError> {
        let missing = || ResponsesError::not_found(format!("no response {id}"));
        let parsed = ResponseId::parse(id).ok_or_else(missing)?;
        let key = conversation_key(user, &parsed.conversation).map_err(|_| missing())?;
        Ok((key, parsed.turn))
    }

    fn running_entry(&self, id: &str, key: &SessionKey) -> Option<Arc<Running>> {
        let running = self.inner.running.lock();
        running.get(id).filter(|r| r.key == *key).cloned()
    }

    /// The response from its conversation's log.
    async fn stored(
        &self,
        key: &SessionKey,
        id: &str,
        turn: &str,
    ) -> Result<ResponseObject, ResponsesError> {
        let found = self
            .runtime()
            .find_request(key, turn)
            .await?
            .ok_or_else(|| ResponsesError::not_found(format!("no response {id}")))?;
        let shape = Arc::new(Shape {
            id: id.to_owned(),
            conversation: key.session_id().to_owned(),
            created_at: seconds(found.message().at_ms),
            model: self.inner.default_model.clone(),
            metadata: Metadata::new(),
            ..Shape::default()
        });
        Ok(match &found.fate {
            Fate::Superseded => shape.superseded(found.message().seq),
            Fate::Answered { turn, .. } => shape.stored(turn),
            Fate::Unanswered => shape.in_progress(),
        })
    }
}

/// What a failed response says of its failure, to anyone who retrieves it: a failed turn's
/// public sentence (the agent's own words are in the history and the log, not here), a store's
/// fault without its wording, a refusal's own message.
fn public_failure(error: &Error) -> String {
    match error {
        Error::AgentFailed { kind, .. } => kind.public_reason().to_owned(),
        error if error.store_fault().is_some() => format!(
            "the store failed this response ({}); retry it with the same Idempotency-Key",
            error.code()
        ),
        Error::SessionFailed { .. } => {
            "the response's session stopped unexpectedly; it may not have run".to_owned()
        }
        error => error.to_string(),
    }
}
