//! Responses as resources: creating one runs its turn on a task of its own, which outlives the
//! request that made it; until the turn's outcome is in, the response is in the service's map
//! of running responses, where `retrieve` and `cancel` find it from any request. Afterwards
//! both read it from the session's log, where its message carries the response's id as its
//! request id.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::events::{Driven, ResponseEvents};
use super::items::item_of;
use super::object::{ResponseObject, Shape};
use super::request::ResponseRequest;
use super::{
    conversation_key, new_id, now_seconds, seconds, Metadata, ResponseId, Responses, ResponsesError,
};
use crate::agent::{
    INSTRUCTIONS_ATTRIBUTE, MAX_TOKENS_ATTRIBUTE, PARALLEL_TOOL_CALLS_ATTRIBUTE,
    RESPONSE_FORMAT_ATTRIBUTE, TEMPERATURE_ATTRIBUTE, TOOLS_ATTRIBUTE, TOOL_CHOICE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
};
use crate::call::{Attributes, CallOptions};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{Fate, Turn};
use crate::stream::{StreamEvent, TurnStream};

/// Events a streamed response's reader may fall behind by before its turn waits for it.
const EVENTS_BUFFER: usize = 64;

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

/// The finished response object of a response that is neither streamed nor in the
/// background: a future that ends with the object once the turn is stored, or with the
/// turn's error. Dropping it leaves the response running.
#[derive(Debug)]
pub struct Finished(oneshot::Receiver<Result<ResponseObject, Error>>);

impl Future for Finished {
    type Output = Result<ResponseObject, ResponsesError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|answer| match answer {
            Ok(Ok(object)) => Ok(object),
            // The conversation named does not exist (the session refused the turn).
            Ok(Err(Error::NotFound { key })) => Err(ResponsesError::not_found_in(
                "conversation",
                format!("no conversation {}", key.session_id()),
            )),
            Ok(Err(error)) => Err(ResponsesError::Runtime(error)),
            Err(_) => Err(ResponsesError::Runtime(Error::InvalidRequest(
                "the response's task ended without an answer".into(),
            ))),
        })
    }
}

/// Where the answer goes.
enum Sink {
    Background,
    Finished(oneshot::Sender<Result<ResponseObject, Error>>),
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
        let seed = idempotency_key.map(|k| format!("{user}\0{k}"));
        let (key, open) = self.where_to_run(user, &request, seed.as_deref()).await?;
        check_outputs(&request, &open)?;
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
        // outcome: the plain call, on a task of its own (so that it outlives its request),
        // with no stream to carry.
        if !request.stream && !request.background {
            let (tx, rx) = oneshot::channel();
            let (service, runtime) = (self.clone(), self.runtime().clone());
            tokio::spawn(async move {
                let answer = runtime.call_with(&key, request.message, options).await;
                service
                    .end(answer, &running, owner, Sink::Finished(tx))
                    .await;
            });
            return Ok(Created::Finished(Finished(rx)));
        }
        // The others are admitted before they are answered, so that a refusal (a busy
        // session, a drain) is the request's answer, not a response that failed later.
        let stream = match self
            .runtime()
            .call_streaming(&key, request.message, options)
            .await
        {
            Ok(stream) => stream,
            Err(error) => {
                if owner {
                    self.leave(&shape.id, &running);
                }
                return Err(error.into());
            }
        };
        let created = shape.in_progress();
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
                        // A reader that went away leaves the turn running.
                        if tx.send(Driven::turn(event)).await.is_err() {
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
        let object = answer.map(|outcome| {
            let cancelled = running.cancel.is_cancelled();
            running.shape.finished(&outcome, cancelled)
        });
        *running.last.lock() = Some(match &object {
            Ok(object) => object.clone(),
            Err(error) => running.shape.failed(error.code(), &error.to_string(), None),
        });
        running.done.cancel();
        if owner {
            self.leave(&running.shape.id, running);
        }
        match sink {
            Sink::Events(tx) => {
                let _ = tx.send(Driven::Done(Box::new(object))).await;
            }
            Sink::Finished(tx) => {
                let _ = tx.send(object);
            }
            Sink::Background => {}
        }
    }

    /// The session a response runs in, and the calls waiting there for the client's outputs:
    /// the named conversation, the previous response's (or a fork of it taken after that
    /// response, when it is not the newest), or a new one.
    async fn where_to_run(
        &self,
        user: &str,
        request: &ResponseRequest,
        seed: Option<&str>,
    ) -> Result<(SessionKey, Vec<String>), ResponsesError> {
        let runtime = self.runtime();
        match (&request.conversation, &request.previous_response_id) {
            (Some(_), Some(_)) => Err(ResponsesError::invalid(
                "previous_response_id",
                "give conversation or previous_response_id, not both",
            )),
            (Some(id), None) => {
                let key = conversation_key(user, id).map_err(in_param("conversation"))?;
                // Whether it exists is the session's to say as it takes the turn
                // (`existing_only`), for a response answered once stored: a read here would
                // cost every response its store's time. One answered before its turn ends
                // (streamed, in the background) must be refused now, and one that answers calls
                // needs the conversation's newest turn: only a conversation live here needs no
                // read to tell.
                let answered_later = !request.stream && !request.background;
                if request.outputs.is_empty() && (answered_later || runtime.is_live(&key)) {
                    return Ok((key, Vec::new()));
                }
                let Some(last) = runtime.last_seq(&key).await? else {
                    return Err(ResponsesError::not_found_in(
                        "conversation",
                        format!("no conversation {id}"),
                    ));
                };
                let open = match runtime.turn(&key, last).await? {
                    Ok(turn) => open_calls(&turn),
                    Err(_) => Vec::new(),
                };
                Ok((key, open))
            }
            (None, Some(previous)) => self.after(user, previous, seed).await,
            (None, None) => {
                let id = new_id("conv_", seed);
                Ok((conversation_key(user, &id)?, Vec::new()))
            }
        }
    }

    /// The session to continue `previous` in: its own when it is the newest there, else a fork
    /// taken just after it (a retry with the same key finds the fork its first attempt made).
    async fn after(
        &self,
        user: &str,
        previous: &str,
        seed: Option<&str>,
    ) -> Result<(SessionKey, Vec<String>), ResponsesError> {
        let missing = || {
            ResponsesError::not_found_in("previous_response_id", format!("no response {previous}"))
        };
        let id = ResponseId::parse(previous).ok_or_else(missing)?;
        let key = conversation_key(user, &id.conversation).map_err(|_| missing())?;
        let runtime = self.runtime();
        let found = runtime
            .find_request(&key, &id.turn)
            .await?
            .ok_or_else(missing)?;
        let Fate::Answered { turn, .. } = found.fate else {
            return Err(missing());
        };
        let open = open_calls(&turn);
        let later = runtime.events(&key, turn.seq + 1, READ_AFTER).await?;
        if !later.iter().any(|event| item_of(event).is_some()) {
            return Ok((key, open));
        }
        let fork = conversation_key(
            user,
            &new_id(
                "conv_",
                seed.map(|s| format!("fork\0{previous}\0{s}")).as_deref(),
            ),
        )?;
        match runtime.fork(&key, &fork, Some(turn.seq)).await {
            Ok(_) => Ok((fork, open)),
            Err(Error::AlreadyExists { .. }) if seed.is_some() => Ok((fork, open)),
            Err(error) => Err(error.into()),
        }
    }

    /// The response `id` as `user` may see it: while it runs, as it stands; then from its
    /// conversation's log.
    pub async fn retrieve(&self, user: &str, id: &str) -> Result<ResponseObject, ResponsesError> {
        let (key, turn) = self.named(user, id)?;
        if let Some(running) = self.running_entry(id, &key) {
            let last = running.last.lock().clone();
            return Ok(last.unwrap_or_else(|| running.shape.in_progress()));
        }
        self.stored(&key, id, &turn, false).await
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
            return self.stored(&key, id, &turn, false).await;
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
        cancelled: bool,
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
            Fate::Answered { turn, .. } => shape.stored(turn, cancelled),
            Fate::Unanswered => shape.in_progress(),
        })
    }
}

/// Events read after a previous response to tell whether it is the newest of its conversation.
const READ_AFTER: usize = 200;

/// The call ids a turn left to the client.
fn open_calls(turn: &Turn) -> Vec<String> {
    turn.open_calls().map(|c| c.call_id.clone()).collect()
}

/// Every function call output answers a call that waits for it (left open by the previous
/// response, or among the input's own calls), and every call the previous response left open
/// is answered when any is.
fn check_outputs(request: &ResponseRequest, open: &[String]) -> Result<(), ResponsesError> {
    for output in &request.outputs {
        if !open.contains(output) && !request.calls.contains(output) {
            return Err(ResponsesError::invalid(
                "input",
                format!("no function call {output:?} waits for its output here"),
            ));
        }
    }
    if let Some(missing) = open.iter().find(|call| !request.outputs.contains(call)) {
        if request.previous_response_id.is_some() || !request.outputs.is_empty() {
            return Err(ResponsesError::invalid(
                "input",
                format!(
                    "the function call {missing:?} waits for its output: send a \
                     function_call_output item for it"
                ),
            ));
        }
    }
    Ok(())
}

fn in_param(param: &'static str) -> impl Fn(ResponsesError) -> ResponsesError {
    move |error| match error {
        ResponsesError::NotFound { message, .. } => ResponsesError::not_found_in(param, message),
        ResponsesError::Invalid { message, .. } => ResponsesError::invalid(param, message),
        other => other,
    }
}
