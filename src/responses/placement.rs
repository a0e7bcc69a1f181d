//! Where a response runs: the conversation it names, its previous response's session (or a
//! fork taken just after that response when it is not the newest), or a new conversation; and
//! the function calls and outputs its input brings, checked against the calls waiting there
//! before anything is written.

use super::items::item_of;
use super::request::ResponseRequest;
use super::{conversation_key, new_id, ResponseId, Responses, ResponsesError};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::{open_calls, Fate};

impl Responses {
    /// The session a response runs in — the named conversation, the previous response's (or a
    /// fork of it taken after that response, when it is not the newest), or a new one — once
    /// the function calls and outputs its input brings are checked against the calls waiting
    /// there (before anything is written: a refused request makes no fork).
    pub(super) async fn where_to_run(
        &self,
        user: &str,
        request: &ResponseRequest,
        seed: Option<&str>,
    ) -> Result<SessionKey, ResponsesError> {
        let runtime = self.runtime();
        match (&request.conversation, &request.previous_response_id) {
            (Some(_), Some(_)) => Err(ResponsesError::invalid(
                "previous_response_id",
                "give conversation or previous_response_id, not both",
            )),
            (Some(id), None) => {
                let key = conversation_key(user, id).map_err(in_param("conversation"))?;
                let tools = !request.outputs.is_empty() || !request.calls.is_empty();
                // Whether it exists is the session's to say as it takes the turn
                // (`existing_only`; a refused one is passivated at once): for a response
                // answered once stored, no lookup here. One answered before its turn ends
                // (streamed, in the background) must be refused now: a conversation live here
                // exists; one that is not needs a store read, as does an input with tool items
                // (the calls of its recent log).
                let answered_later = !request.stream && !request.background;
                if !tools && (answered_later || runtime.is_live(&key)) {
                    return Ok(key);
                }
                let Some(last) = runtime.last_seq(&key).await? else {
                    return Err(ResponsesError::not_found_in(
                        "conversation",
                        format!("no conversation {id}"),
                    ));
                };
                if tools {
                    let from = last.saturating_sub(OPEN_CALLS_LOOKBACK as u64 - 1).max(1);
                    let recent = runtime.events(&key, from, OPEN_CALLS_LOOKBACK).await?;
                    let (known, open) = open_calls(&recent);
                    check_tool_items(request, &known, &open)?;
                }
                Ok(key)
            }
            (None, Some(previous)) => self.after(user, previous, request, seed).await,
            (None, None) => {
                check_tool_items(request, &[], &[])?;
                let id = new_id("conv_", seed);
                Ok(conversation_key(user, &id)?)
            }
        }
    }

    /// The session to continue `previous` in: its own when it is the newest there, else a fork
    /// taken just after it (a retry with the same key finds the fork its first attempt made).
    async fn after(
        &self,
        user: &str,
        previous: &str,
        request: &ResponseRequest,
        seed: Option<&str>,
    ) -> Result<SessionKey, ResponsesError> {
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
        let known: Vec<String> = turn.calls.iter().map(|c| c.call_id.clone()).collect();
        let open: Vec<String> = turn.open_calls().map(|c| c.call_id.clone()).collect();
        check_tool_items(request, &known, &open)?;
        if request.previous_response_id.is_some() {
            check_answered(request, &open)?;
        }
        let later = runtime.events(&key, turn.seq + 1, READ_AFTER).await?;
        if !later.iter().any(|event| item_of(event).is_some()) {
            return Ok(key);
        }
        let fork = conversation_key(
            user,
            &new_id(
                "conv_",
                seed.map(|s| format!("fork\0{previous}\0{s}")).as_deref(),
            ),
        )?;
        match runtime.fork(&key, &fork, Some(turn.seq)).await {
            Ok(_) => Ok(fork),
            Err(Error::AlreadyExists { .. }) if seed.is_some() => Ok(fork),
            Err(error) => Err(error.into()),
        }
    }
}

/// Events read after a previous response to tell whether it is the newest of its conversation.
const READ_AFTER: usize = 200;

/// Events of a conversation's log read back for the calls its input's tool items concern.
const OPEN_CALLS_LOOKBACK: usize = 200;

/// The function calls and outputs an input brings, against the session's calls (`known`) and
/// those waiting for an output (`open`): an output answers a waiting call or a call brought
/// before it in the same input; a call brought is not one the session holds already (its id
/// would name two calls).
fn check_tool_items(
    request: &ResponseRequest,
    known: &[String],
    open: &[String],
) -> Result<(), ResponsesError> {
    if let Some(twice) = request.calls.iter().find(|call| known.contains(call)) {
        return Err(ResponsesError::invalid(
            "input",
            format!(
                "the function call {twice:?} is in the conversation already: send only its \
                 function_call_output"
            ),
        ));
    }
    for output in &request.outputs {
        if !open.contains(output) && !request.calls.contains(output) {
            return Err(ResponsesError::invalid(
                "input",
                format!("no function call {output:?} waits for its output here"),
            ));
        }
    }
    Ok(())
}

/// Every call the previous response left to the client is answered.
fn check_answered(request: &ResponseRequest, open: &[String]) -> Result<(), ResponsesError> {
    match open.iter().find(|call| !request.outputs.contains(call)) {
        Some(missing) => Err(ResponsesError::invalid(
            "input",
            format!(
                "the function call {missing:?} waits for its output: send a \
                 function_call_output item for it"
            ),
        )),
        None => Ok(()),
    }
}

fn in_param(param: &'static str) -> impl Fn(ResponsesError) -> ResponsesError {
    move |error| match error {
        ResponsesError::NotFound { message, .. } => ResponsesError::not_found_in(param, message),
        ResponsesError::Invalid { message, .. } => ResponsesError::invalid(param, message),
        other => other,
    }
}
