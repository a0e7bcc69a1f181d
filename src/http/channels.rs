//! `/v1/channels/{channel}/messages` and `/v1/pairings/{channel}/{channel_user}`: thin layers
//! over [`crate::channel::ChannelRouter`].

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::answer::{answer, wants_events, Target, TurnArgs};
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath};
use super::Gateway;
use crate::call::OverlapPolicy;
use crate::channel::ChannelMessage;

/// `POST /v1/channels/{channel}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageBody {
    chat: String,
    #[serde(default)]
    thread: Option<String>,
    /// The sender's id on the channel.
    user: String,
    input: String,
    #[serde(default)]
    policy: Option<OverlapPolicy>,
    #[serde(default)]
    cancel_on_timeout: bool,
}

/// `PUT /v1/pairings/{channel}/{channel_user}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PairingBody {
    user: String,
}

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

pub(crate) async fn put_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<PairingBody>,
) -> Result<Json<Value>, ApiError> {
    // Pairing vouches that an account is a person: only an operator may do it.
    caller.require_admin()?;
    let previous = gateway
        .channels()
        .pair(&channel, &channel_user, &body.user)
        .await?;
    Ok(Json(json!({
        "channel": channel,
        "channel_user": channel_user,
        "user": body.user,
        "previous": previous,
    })))
}

pub(crate) async fn get_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(json!({
        "channel": channel,
        "channel_user": channel_user,
        "user": user,
    })))
}

pub(crate) async fn delete_pairing(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((channel, channel_user)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    caller.require_admin()?;
    let removed = gateway.channels().unpair(&channel, &channel_user).await?;
    Ok(Json(json!({ "deleted": removed.is_some() })))
}
