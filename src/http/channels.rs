//! `/v1/channels/{channel}/messages` and `/v1/pairings/{channel}/{channel_user}`: thin layers
//! over [`crate::channel::ChannelRouter`].

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::answer::{answer, wants_events, Target, TurnArgs};
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::gateway::Gateway;
use super::schema::Deleted;
use super::schema::{ChannelPath, PairingPath, Refusals};
use crate::channel::ChannelMessage;
use crate::OverlapPolicy;

/// `POST /v1/channels/{channel}/messages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageBody {
    /// The chat (conversation) on the channel.
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    chat: String,
    /// The thread within the chat, if any.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    thread: Option<String>,
    /// The sender's id on the channel.
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user: String,
    /// The message.
    input: String,
    /// What to do when the chat's session is running a turn (`--channel-policy` if absent).
    #[serde(default)]
    policy: Option<OverlapPolicy>,
    /// Interrupt the turn when this request ends without its answer.
    #[serde(default)]
    cancel_on_timeout: bool,
}

/// A pairing: the channel account and the user it speaks for.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Pairing {
    channel: String,
    channel_user: String,
    user: String,
    /// On `PUT`: the user the account was paired to before, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    previous: Option<Option<String>>,
}

/// `PUT /v1/pairings/{channel}/{channel_user}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PairingBody {
    /// The user the account speaks for (not starting with `channel:`, which is reserved).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^(?!channel:)[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    user: String,
}

/// Routes a channel message to its chat's session and runs a turn there (JSON or events, as
/// for session turns).
#[utoipa::path(post, path = "/v1/channels/{channel}/messages", tag = "channels",
    params(ChannelPath, ("Idempotency-Key" = Option<String>, Header,
        pattern = "^[!-~]{1,128}$",
        description = "1–128 visible ASCII bytes: a retry with the same key gets the first outcome")),
    request_body = MessageBody,
    responses((status = 200, description = "The turn's outcome, or its event stream",
        content((super::answer::OutcomeBody = "application/json"),
            (String = "text/event-stream"))), Refusals))]
pub(crate) async fn post_message(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(channel): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<MessageBody>,
) -> Result<Response, ApiError> {
    caller.require_channel(&channel)?;
    let message = ChannelMessage {
        channel,
        chat: body.chat,
        thread: body.thread,
        channel_user: body.user,
        input: body.input,
    };
    let args = TurnArgs {
        policy: body.policy,
        cancel_on_timeout: body.cancel_on_timeout,
        request_id: super::answer::idempotency_key(&headers),
    };
    answer(
        &gateway,
        &caller,
        Target::Channel(message),
        args,
        wants_events(&headers),
    )
    .await
}

/// Pairs a channel account with a user (admin only).
#[utoipa::path(put, path = "/v1/pairings/{channel}/{channel_user}", tag = "channels",
    params(PairingPath), request_body = PairingBody,
    responses((status = 200, body = Pairing), Refusals))]
pub(crate) async fn put_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<PairingBody>,
) -> Result<Json<Pairing>, ApiError> {
    // Pairing vouches that an account is a person: only an operator may do it.
    caller.require_admin()?;
    let previous = gateway
        .channels()
        .pair(&channel, &channel_user, &body.user)
        .await?;
    Ok(Json(Pairing {
        channel,
        channel_user,
        user: body.user,
        previous: Some(previous),
    }))
}

/// The user a channel account is paired with.
#[utoipa::path(get, path = "/v1/pairings/{channel}/{channel_user}", tag = "channels",
    params(PairingPath), responses((status = 200, body = Pairing), Refusals))]
pub(crate) async fn get_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
) -> Result<Json<Pairing>, ApiError> {
    let user = gateway.channels().paired(&channel, &channel_user).await?;
    // A user token sees only its own pairings, and cannot tell a missing pairing from another
    // user's.
    let user = match (caller.is_admin(), user) {
        (true, Some(user)) => user,
        (true, None) => {
            return Err(ApiError::NotFound(format!(
                "{channel_user:?} on {channel:?} is not paired"
            )))
        }
        (false, Some(user)) if caller.require_user(&user).is_ok() => user,
        (false, _) => {
            return Err(ApiError::Forbidden(
                "this token sees only pairings to its own user".into(),
            ))
        }
    };
    Ok(Json(Pairing {
        channel,
        channel_user,
        user,
        previous: None,
    }))
}

/// Removes a pairing (admin only).
#[utoipa::path(delete, path = "/v1/pairings/{channel}/{channel_user}", tag = "channels",
    params(PairingPath), responses((status = 200, body = Deleted), Refusals))]
pub(crate) async fn delete_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
) -> Result<Json<Deleted>, ApiError> {
    caller.require_admin()?;
    let removed = gateway.channels().unpair(&channel, &channel_user).await?;
    Ok(Json(Deleted::new(removed.is_some())))
}
