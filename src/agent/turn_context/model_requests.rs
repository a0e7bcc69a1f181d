//! What an agent tells its turn about its requests to the model: when each try started, was
//! answered and ended (for the turn's timing record), and what each round sent (kept for
//! operators to read, [`crate::Runtime::sent_requests`]).

use super::TurnContext;

/// When one request to the model happened, as the agent marked it
/// ([`TurnContext::model_request_started`] and the two after it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelRequestMarks {
    pub round: u32,
    pub attempt: u32,
    pub started: tokio::time::Instant,
    pub answered: Option<tokio::time::Instant>,
    pub ended: Option<tokio::time::Instant>,
    pub status: Option<u16>,
}

/// A request to the model marked in a turn's record ([`TurnContext::model_request_started`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelRequestId(Option<usize>);

impl TurnContext {
    /// Marks a request to the model sent now, for the turn's timing record
    /// ([`crate::state::ModelRequestTiming`]): `round` is the turn's request it is an attempt
    /// of (1 for the first, one more per tool round), `attempt` 1 for the first try and one
    /// more per retry. Mark when its response's status came with
    /// [`Self::model_request_answered`] and when it ended with [`Self::model_request_ended`];
    /// one never ended ends with the turn. Past
    /// [`crate::state::TurnTiming::MAX_MODEL_REQUESTS`] in a turn, requests are not recorded.
    pub fn model_request_started(&self, round: u32, attempt: u32) -> ModelRequestId {
        let mut record = self.record.lock();
        if record.model_requests.len() >= crate::state::TurnTiming::MAX_MODEL_REQUESTS {
            return ModelRequestId(None);
        }
        record.model_requests.push(ModelRequestMarks {
            round,
            attempt,
            started: tokio::time::Instant::now(),
            answered: None,
            ended: None,
            status: None,
        });
        ModelRequestId(Some(record.model_requests.len() - 1))
    }

    /// Marks that the response of the request `id` came now, with this HTTP `status`.
    pub fn model_request_answered(&self, id: ModelRequestId, status: u16) {
        let Some(at) = id.0 else { return };
        if let Some(entry) = self.record.lock().model_requests.get_mut(at) {
            if entry.answered.is_none() {
                entry.answered = Some(tokio::time::Instant::now());
                entry.status = Some(status);
            }
        }
    }

    /// Marks that the request `id` ended now: its body was read, or it failed.
    pub fn model_request_ended(&self, id: ModelRequestId) {
        let Some(at) = id.0 else { return };
        if let Some(entry) = self.record.lock().model_requests.get_mut(at) {
            entry.ended.get_or_insert_with(tokio::time::Instant::now);
        }
    }

    /// Records the request the agent is about to send its model for round `request.round`,
    /// with its secrets already taken out (the API key, a gateway's header values): the runtime
    /// keeps the turn's requests in memory for a while ([`crate::Runtime::sent_requests`]) so
    /// that an operator can read exactly what the model was given. Record each round once, not
    /// each retry. Past [`crate::state::TurnTiming::MAX_MODEL_REQUESTS`] requests in a turn
    /// nothing more is recorded, and past [`crate::agent::MAX_SENT_BYTES_PER_TURN`] bytes of
    /// bodies later requests are kept without theirs.
    pub fn model_request_sent(&self, request: crate::agent::SentRequest) {
        let mut record = self.record.lock();
        if record.sent.len() >= crate::state::TurnTiming::MAX_MODEL_REQUESTS {
            return;
        }
        let request = match record.sent_bytes + request.body.len() {
            within if within <= crate::agent::MAX_SENT_BYTES_PER_TURN => {
                record.sent_bytes = within;
                request
            }
            _ => request.without_body(),
        };
        record.sent.push(request);
    }
}
