//! `/v1/sessions/{user}/{session}…` and `/v1/users/{user}…`: a user's sessions.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::answer::{answer, within, OutcomeBody, Target, TurnArgs};
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson};
use super::Gateway;
use crate::call::{CallOptions, OverlapPolicy};
use crate::key::{validate_id, KeyPart, SessionKey};
use crate::runtime::{Placement, Runtime};
use crate::session::SessionView;
use crate::state::StateMap;
use crate::store::{PageRequest, SessionMeta, MAX_PAGE};

/// `POST …/turns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnBody {
    input: String,
    #[serde(default)]
    policy: Option<OverlapPolicy>,
    #[serde(default)]
    cancel_on_timeout: bool,
}

/// `POST …/interrupt`, when it carries a new input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InterruptBody {
    input: String,
}

/// `POST …/fork`: the new session's id (same user) and, optionally, the last event to copy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    to: String,
    #[serde(default)]
    at_seq: Option<u64>,
}

/// `GET /v1/users/{user}/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// The session as `GET` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct SessionBody {
    user: String,
    session: String,
    /// Version, event count, times, counters.
    meta: SessionMeta,
    /// Session-scoped state.
    state: StateMap,
    /// The user's `user:` state.
    user_state: StateMap,
    /// The application's `app:` state: shown to admin tokens only, since it is shared by
    /// every user.
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// Checks the caller may reach `user`'s sessions, then builds the key (a bad id is a 400).
pub(crate) fn session_key(
    caller: &Caller,
    user: String,
    session: String,
) -> Result<SessionKey, ApiError> {
    caller.require_user(&user)?;
    Ok(SessionKey::new(user, session)?)
}

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

pub(crate) async fn interrupt(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    OptionalJson(body): OptionalJson<InterruptBody>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    // Checked first: a new input would be refused, and the running turn must not be cut for
    // a request that is then answered 503.
    if body.is_some() && runtime.is_draining() {
        return Err(crate::Error::Draining.into());
    }
    let interrupted = runtime.interrupt(&key);
    let Some(body) = body else {
        return Ok(Json(json!({ "interrupted": interrupted })));
    };
    // `interrupt_with` interrupts again (a no-op now) and runs the input ahead of the queue.
    let timeout = gateway.config().request_timeout;
    let call = runtime.interrupt_with(&key, body.input, CallOptions::default());
    let outcome = within(timeout, false, call).await??;
    Ok(Json(json!({
        "interrupted": interrupted,
        "outcome": OutcomeBody::of(outcome, None, false),
    })))
}

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

pub(crate) async fn clear(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let runtime = gateway.runtime();
    // Clearing goes through the session, which would create an empty one: check it exists.
    if runtime.state(&key).await?.is_none() {
        return Err(ApiError::NotFound(format!("no session {key}")));
    }
    runtime.clear_context(&key).await?;
    Ok(Json(json!({ "cleared": true })))
}

pub(crate) async fn fork(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<ForkBody>,
) -> Result<Json<Value>, ApiError> {
    let source = session_key(&caller, user, session)?;
    let target = SessionKey::new(source.user_id(), body.to)?;
    let copied = gateway
        .runtime()
        .fork(&source, &target, body.at_seq)
        .await?;
    Ok(Json(json!({
        "user": target.user_id(),
        "session": target.session_id(),
        "events": copied,
    })))
}

pub(crate) async fn delete_session(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&caller, user, session)?;
    let deleted = gateway.runtime().delete(&key).await?;
    Ok(Json(json!({ "deleted": deleted })))
}

pub(crate) async fn list_sessions(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(user): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<crate::store::Page>, ApiError> {
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

pub(crate) async fn delete_user(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(json!({
        "deleted_sessions": sessions,
        "deleted_pairings": pairings,
    })))
}
