//! `/v1/sessions/{user}/{session}…` and `/v1/users/{user}…`: a user's sessions.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::answer::{answer, within, OutcomeBody, Target, TurnArgs};
use super::auth::{session_key, Caller};
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson};
use super::gateway::Gateway;
use super::schema::{Deleted, Refusals, SessionPath, UserPath};
use crate::key::{validate_id, KeyPart, SessionKey};
use crate::state::StateMap;
use crate::SessionView;
use crate::{CallOptions, OverlapPolicy};
use crate::{PageRequest, SessionMeta, MAX_PAGE};
use crate::{Placement, Runtime};

/// `POST …/turns`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnBody {
    /// The message.
    input: String,
    /// What to do when the session is running a turn (the server's `--policy` if absent).
    #[serde(default)]
    policy: Option<OverlapPolicy>,
    /// Interrupt the turn when this request ends without its answer (timeout or disconnect).
    #[serde(default)]
    cancel_on_timeout: bool,
}

/// `POST …/interrupt`, when it carries a new input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InterruptBody {
    /// The message to run as soon as the running turn is cut.
    input: String,
}

/// `POST …/fork`: the new session's id (same user) and, optionally, the last event to copy.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// The new session's id, under the same user.
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    to: String,
    /// The last event to copy (all of them if absent).
    #[serde(default)]
    at_seq: Option<u64>,
}

/// `GET /v1/users/{user}/sessions`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Sessions per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// `POST …/interrupt`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Interrupted {
    /// Whether a running turn was cut.
    interrupted: bool,
    /// The outcome of the body's input, when the request carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<OutcomeBody>,
}

/// `POST …/clear`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Cleared {
    /// Always `true`.
    cleared: bool,
}

/// `POST …/fork`'s answer: the new session and how many events it got.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Forked {
    user: String,
    session: String,
    /// Events copied.
    events: u64,
}

/// `DELETE /v1/users/{user}`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct UserDeleted {
    deleted_sessions: u64,
    deleted_pairings: u64,
}

/// The session as `GET` shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionBody {
    user: String,
    session: String,
    /// Version, event count, times, counters.
    meta: SessionMeta,
    /// Session-scoped state.
    #[schema(value_type = Object)]
    state: StateMap,
    /// The user's `user:` state.
    #[schema(value_type = Object)]
    user_state: StateMap,
    /// The application's `app:` state: shown to admin tokens only, since it is shared by
    /// every user.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    app_state: Option<StateMap>,
    /// The newest events (the context window), oldest first.
    events: Vec<crate::state::Event>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    live: bool,
    /// Messages sent to the session here and not answered yet (running plus waiting).
    pending: usize,
    unsaved: usize,
    shutdown_interrupted: bool,
    /// The advertised address of the process that holds the session (its lease), `null` when
    /// none does or the gateway shares no sessions with other processes.
    owner: Option<String>,
    /// The epoch of that holding: one holding, one epoch. Absent when `owner` is `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    owner_epoch: Option<u64>,
}

impl SessionBody {
    fn of(view: SessionView, with_app_state: bool) -> Self {
        Self {
            user: view.record.key.user_id().to_owned(),
            session: view.record.key.session_id().to_owned(),
            meta: SessionMeta::of(&view.record),
            state: view.record.state,
            user_state: view.user_state,
            app_state: with_app_state.then_some(view.app_state),
            events: view.events,
            summary: view.record.summary.map(|s| s.text),
            live: view.live,
            pending: 0,
            unsaved: view.unsaved,
            shutdown_interrupted: view.record.shutdown_interrupted,
            owner: None,
            owner_epoch: None,
        }
    }

    /// Fills in who holds the session, as this process sees it.
    async fn with_owner(mut self, runtime: &Runtime, key: &SessionKey) -> Result<Self, ApiError> {
        let Some(me) = runtime.address() else {
            return Ok(self);
        };
        let placement = if self.live {
            Placement::Here
        } else {
            runtime.placement(key).await?
        };
        (self.owner, self.owner_epoch) = match placement {
            Placement::Here => (Some(me.to_owned()), runtime.lease_epoch(key)),
            Placement::Elsewhere(owner) => (Some(owner.address), Some(owner.epoch)),
            Placement::Unowned => (None, None),
        };
        Ok(self)
    }
}

/// Runs a turn: the answer is its outcome (JSON), or its events as they happen (`Accept:
/// text/event-stream`: `chunk` events, then `outcome`, or `error`).
#[utoipa::path(post, path = "/v1/sessions/{user}/{session}/turns", tag = "sessions",
    params(SessionPath, ("Idempotency-Key" = Option<String>, Header,
        pattern = "^[!-~]{1,128}$",
        description = "1–128 visible ASCII bytes: a retry with the same key gets the first outcome")),
    request_body = TurnBody,
    responses((status = 200, description = "The turn's outcome, or its event stream",
        content((OutcomeBody = "application/json"), (String = "text/event-stream"))), Refusals))]
pub(crate) async fn post_turn(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TurnBody>,
) -> Result<Response, ApiError> {
    let key = session_key(&caller, user, session)?;
    let args = TurnArgs {
        policy: body.policy,
        cancel_on_timeout: body.cancel_on_timeout,
        request_id: super::answer::idempotency_key(&headers),
    };
    let events = super::answer::wants_events(&headers);
    answer(
        &gateway,
        &caller,
        Target::Session(key, body.input),
        args,
        events,
    )
    .await
}

/// Interrupts the running turn; with a body, runs its input next, ahead of the queue.
#[utoipa::path(post, path = "/v1/sessions/{user}/{session}/interrupt", tag = "sessions",
    params(SessionPath),
    request_body = Option<InterruptBody>,
    responses((status = 200, body = Interrupted), Refusals))]
pub(crate) async fn interrupt(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    OptionalJson(body): OptionalJson<InterruptBody>,
) -> Result<Json<Interrupted>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    // Checked first: a new input would be refused, and the running turn must not be cut for
    // a request that is then answered 503.
    if body.is_some() && runtime.is_draining() {
        return Err(crate::Error::Draining.into());
    }
    let interrupted = runtime.interrupt(&key);
    let Some(body) = body else {
        return Ok(Json(Interrupted {
            interrupted,
            outcome: None,
        }));
    };
    // `interrupt_with` interrupts again (a no-op now) and runs the input ahead of the queue.
    let timeout = gateway.config().request_timeout;
    let call = runtime.interrupt_with(&key, body.input, CallOptions::default());
    let outcome = within(timeout, false, call)
        .await?
        .map_err(|e| ApiError::from(e).of_turn())?;
    Ok(Json(Interrupted {
        interrupted,
        outcome: Some(OutcomeBody::of(outcome, None, false)),
    }))
}

/// The session: metadata, state, the newest events, and where it lives.
#[utoipa::path(get, path = "/v1/sessions/{user}/{session}", tag = "sessions",
    params(SessionPath), responses((status = 200, body = SessionBody), Refusals))]
pub(crate) async fn get_session(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<SessionBody>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    match runtime.state(&key).await? {
        Some(view) => {
            let mut body = SessionBody::of(view, caller.is_admin());
            body.pending = runtime.pending(&key);
            Ok(Json(body.with_owner(runtime, &key).await?))
        }
        None => Err(ApiError::NotFound(format!("no session {key}"))),
    }
}

/// Clears the session's context: later turns see none of the earlier events.
#[utoipa::path(post, path = "/v1/sessions/{user}/{session}/clear", tag = "sessions",
    params(SessionPath), responses((status = 200, body = Cleared), Refusals))]
pub(crate) async fn clear(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Cleared>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    // Clearing goes through the session, which would create an empty one: check it exists.
    if runtime.state(&key).await?.is_none() {
        return Err(ApiError::NotFound(format!("no session {key}")));
    }
    runtime.clear_context(&key).await?;
    Ok(Json(Cleared { cleared: true }))
}

/// Copies the session (up to an event) into a new session of the same user.
#[utoipa::path(post, path = "/v1/sessions/{user}/{session}/fork", tag = "sessions",
    params(SessionPath), request_body = ForkBody,
    responses((status = 200, body = Forked), Refusals))]
pub(crate) async fn fork(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ForkBody>,
) -> Result<Json<Forked>, ApiError> {
    let source = session_key(&caller, user, session)?;
    let target = SessionKey::new(source.user_id(), body.to)?;
    let copied = gateway
        .runtime()
        .fork(&source, &target, body.at_seq)
        .await?;
    Ok(Json(Forked {
        user: target.user_id().to_owned(),
        session: target.session_id().to_owned(),
        events: copied,
    }))
}

/// Deletes the session: its history, state and lease.
#[utoipa::path(delete, path = "/v1/sessions/{user}/{session}", tag = "sessions",
    params(SessionPath), responses((status = 200, body = Deleted), Refusals))]
pub(crate) async fn delete_session(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Deleted>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let deleted = gateway.runtime().delete(&key).await?;
    Ok(Json(Deleted::new(deleted)))
}

/// The user's sessions, a page at a time, by session id.
#[utoipa::path(get, path = "/v1/users/{user}/sessions", tag = "sessions",
    params(UserPath, ListQuery), responses((status = 200, body = crate::Page), Refusals))]
pub(crate) async fn list_sessions(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(user): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<crate::Page>, ApiError> {
    caller.require_user(&user)?;
    validate_id(&user, KeyPart::User)?;
    let limit = query.limit.unwrap_or(PageRequest::default().limit);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let page = PageRequest {
        limit,
        cursor: query.cursor,
    };
    Ok(Json(gateway.runtime().list(&user, &page).await?))
}

/// Deletes every session and pairing of the user.
#[utoipa::path(delete, path = "/v1/users/{user}", tag = "sessions",
    params(UserPath), responses((status = 200, body = UserDeleted), Refusals))]
pub(crate) async fn delete_user(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<UserDeleted>, ApiError> {
    caller.require_user(&user)?;
    validate_id(&user, KeyPart::User)?;
    // Runs to the end on its own task: a request timeout or a disconnect must not leave the
    // user half deleted (some sessions gone, pairings kept).
    let work = {
        let gateway = gateway.clone();
        async move {
            let sessions = gateway.runtime().delete_user(&user).await?;
            let pairings = gateway.channels().pairings().remove_user(&user).await?;
            Ok::<_, ApiError>((sessions, pairings))
        }
    };
    let (sessions, pairings) = tokio::spawn(work)
        .await
        .map_err(|e| ApiError::Internal(format!("user deletion task failed: {e}")))??;
    Ok(Json(UserDeleted {
        deleted_sessions: sessions,
        deleted_pairings: pairings,
    }))
}
