//! Forwarding: a request for a session that another live process owns is sent to that process,
//! and its answer streamed back unchanged.
//!
//! Before a session-scoped route runs, the gateway asks where the session is served
//! ([`Runtime::placement`](crate::Runtime::placement); nothing to ask when it is live here).
//! Owned by another process → forward; here or nowhere → run it here, and should that answer
//! `owned_elsewhere` (another process took the session in between; nothing ran), forward then.
//!
//! One hop at most: a forwarded request carries [`FORWARDED_HEADER`](super::FORWARDED_HEADER), and a process that
//! receives one never forwards it again — it serves it, or answers 421 `owned_elsewhere` naming
//! the owner it sees. On that 421 the first process looks the owner up again and tries once
//! more. `docs/cluster.md` ("Forwarding") has the whole protocol.

mod relay;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

pub(crate) use relay::Forwarder;

use super::auth::Caller;
use super::error::{ApiError, OwnerHint};
use super::extract::bytes_rejection;
use super::gateway::Gateway;
use super::headers::{FORWARDED_HEADER, SERVED_BY_HEADER};
use crate::channel::channel_session_key;
use crate::key::SessionKey;
use crate::Error;
use crate::Owner;
use crate::Placement;

/// What to do with a request, from where its session is served.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// Serve it here.
    Local,
    /// Send it to this owner.
    Forward(Owner),
    /// An earlier run of this process (same address, another instance) holds the lease: it is
    /// gone, and forwarding would only reach ourselves. Wait for the lease to expire.
    Restarted(Owner),
}

fn decide(placement: Placement, me: &str) -> Route {
    match placement {
        Placement::Elsewhere(owner) if same_address(&owner.address, me) => Route::Restarted(owner),
        Placement::Elsewhere(owner) => Route::Forward(owner),
        Placement::Here | Placement::Unowned => Route::Local,
    }
}

fn same_address(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// Middleware of `/v1/sessions/{user}/{session}…`.
pub(crate) async fn session_route(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let key = session_key_of(&mut parts, &gateway).await;
    let Some(key) = key else {
        // Unauthorised or malformed: the handler gives the documented answer, here.
        return next.run(Request::from_parts(parts, body)).await;
    };
    match read_body(&parts, body, &gateway).await {
        Ok(bytes) => Pending::new(gateway, key, parts, bytes, next).route().await,
        Err(error) => error.into_response(),
    }
}

async fn session_key_of(parts: &mut Parts, gateway: &Gateway) -> Option<SessionKey> {
    let caller = Caller::from_request_parts(parts, gateway).await.ok()?;
    let Path((user, session)) = Path::<(String, String)>::from_request_parts(parts, gateway)
        .await
        .ok()?;
    caller.require_user(&user).ok()?;
    SessionKey::new(user, session).ok()
}

/// The fields of a channel message that name its session.
#[derive(Deserialize)]
struct ChannelFields {
    chat: String,
    #[serde(default)]
    thread: Option<String>,
}

/// Middleware of `POST /v1/channels/{channel}/messages`: the session is the chat's (or its
/// thread's), read from the body.
pub(crate) async fn channel_route(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let Some(channel) = channel_of(&mut parts, &gateway).await else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    let bytes = match read_body(&parts, body, &gateway).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let key = serde_json::from_slice::<ChannelFields>(&bytes)
        .ok()
        .and_then(|f| channel_session_key(&channel, &f.chat, f.thread.as_deref()).ok());
    match key {
        Some(key) => Pending::new(gateway, key, parts, bytes, next).route().await,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

async fn channel_of(parts: &mut Parts, gateway: &Gateway) -> Option<String> {
    let caller = Caller::from_request_parts(parts, gateway).await.ok()?;
    let Path(channel) = Path::<String>::from_request_parts(parts, gateway)
        .await
        .ok()?;
    caller.require_channel(&channel).ok()?;
    Some(channel)
}

/// Sends a request whose session a route read itself (`key`) to where that session is served,
/// or serves it here when it names none: the OpenAI routes' middleware
/// (`openai::routing::openai_route`) ends here.
pub(crate) async fn route_keyed(
    gateway: Gateway,
    key: Option<SessionKey>,
    parts: Parts,
    bytes: Bytes,
    next: Next,
) -> Response {
    match key {
        Some(key) => Pending::new(gateway, key, parts, bytes, next).route().await,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// Reads the whole body (within the gateway's limit), so that it can be sent again.
pub(crate) async fn read_body(
    parts: &Parts,
    body: Body,
    gateway: &Gateway,
) -> Result<Bytes, ApiError> {
    let mut request = Request::new(body);
    // The body limit travels as an extension of the request.
    *request.extensions_mut() = parts.extensions.clone();
    Bytes::from_request(request, gateway)
        .await
        .map_err(|e| bytes_rejection(&e, gateway))
}

/// A request held until it is known where it is served.
struct Pending {
    gateway: Gateway,
    key: SessionKey,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
    /// What serving it here needs; taken the one time it is.
    here: Option<(Parts, Next)>,
}

impl Pending {
    fn new(gateway: Gateway, key: SessionKey, parts: Parts, bytes: Bytes, next: Next) -> Self {
        Self {
            gateway,
            key,
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
            bytes,
            here: Some((parts, next)),
        }
    }

    fn me(&self) -> &str {
        self.gateway.runtime().address().unwrap_or_default()
    }

    async fn placement(&self) -> Result<Placement, ApiError> {
        let runtime = self.gateway.runtime();
        if runtime.is_live(&self.key) {
            return Ok(Placement::Here);
        }
        Ok(runtime.placement(&self.key).await?)
    }

    async fn route(mut self) -> Response {
        if self.headers.contains_key(FORWARDED_HEADER) {
            return self.serve_forwarded().await;
        }
        let placement = match self.placement().await {
            Ok(placement) => placement,
            Err(error) => return error.into_response(),
        };
        match decide(placement, self.me()) {
            Route::Local => {
                let response = self.serve_here().await;
                // Another process took the session between the look-up and the activation;
                // nothing ran here, so the request goes there.
                match response.extensions().get::<OwnerHint>() {
                    Some(OwnerHint(owner)) => {
                        let owner = owner.clone();
                        tracing::debug!(key = %self.key, to = %owner.address, "taken meanwhile");
                        self.forward(decide(Placement::Elsewhere(owner), self.me()))
                            .await
                    }
                    None => response,
                }
            }
            route => self.forward(route).await,
        }
    }

    /// A request another process forwarded: served here, or answered with the owner seen from
    /// here — never forwarded again.
    async fn serve_forwarded(mut self) -> Response {
        let placement = match self.placement().await {
            Ok(placement) => placement,
            Err(error) => return error.into_response(),
        };
        match decide(placement, self.me()) {
            Route::Local => self.serve_here().await,
            Route::Forward(owner) => ApiError::from(Error::OwnedElsewhere {
                key: self.key.clone(),
                owner,
            })
            .into_response(),
            Route::Restarted(owner) => self.restarted(&owner),
        }
    }

    /// Forwards along `route`; on a 421 from the owner, looks again and tries once more.
    async fn forward(&mut self, mut route: Route) -> Response {
        let mut retries = 1;
        loop {
            let owner = match route {
                Route::Forward(owner) => owner,
                Route::Restarted(owner) => return self.restarted(&owner),
                Route::Local => return self.serve_here().await,
            };
            let answer = self.send(&owner).await;
            if answer.status() != StatusCode::MISDIRECTED_REQUEST || retries == 0 {
                return answer;
            }
            retries -= 1;
            route = match self.placement().await {
                Ok(placement) => decide(placement, self.me()),
                Err(error) => return error.into_response(),
            };
            if route == Route::Local && self.here.is_none() {
                // Served here once already: the owner's answer stands (nothing ran there).
                return answer;
            }
        }
    }

    async fn send(&self, owner: &Owner) -> Response {
        let forwarder = match self.gateway.forwarder() {
            Ok(forwarder) => forwarder,
            Err(error) => return error.into_response(),
        };
        let request = relay::Outgoing {
            method: &self.method,
            uri: &self.uri,
            headers: &self.headers,
            body: self.bytes.clone(),
        };
        let answer = forwarder
            .send(&owner.address, request, self.gateway.config())
            .await;
        let outcome = match &answer {
            Ok(response) if response.status() == StatusCode::MISDIRECTED_REQUEST => "misdirected",
            Ok(_) => "answered",
            Err(relay::SendError::Unreachable) => "unreachable",
            Err(relay::SendError::Failed) => "failed",
            Err(relay::SendError::Timeout) => "timeout",
        };
        metrics::counter!("turnstile_forwarded_total", "outcome" => outcome).increment(1);
        tracing::debug!(key = %self.key, to = %owner.address, outcome, "forwarded");
        answer.unwrap_or_else(|error| self.send_error(error).into_response())
    }

    fn send_error(&self, error: relay::SendError) -> ApiError {
        let retry_after = self.lease_ttl();
        match error {
            relay::SendError::Unreachable => ApiError::OwnerUnreachable { retry_after },
            relay::SendError::Failed => ApiError::OwnerFailed { retry_after },
            relay::SendError::Timeout => ApiError::RequestTimeout {
                after: self.gateway.config().request_timeout,
            },
        }
    }

    fn lease_ttl(&self) -> std::time::Duration {
        self.gateway
            .runtime()
            .config()
            .ownership
            .as_ref()
            .map_or(crate::config::DEFAULT_LEASE_TTL, |o| o.lease_ttl)
    }

    fn restarted(&self, owner: &Owner) -> Response {
        tracing::debug!(key = %self.key, instance = %owner.instance, "held by an earlier run");
        ApiError::OwnerRestarted {
            retry_after: self.lease_ttl(),
        }
        .into_response()
    }

    /// Runs the route's handler here (at most once).
    async fn serve_here(&mut self) -> Response {
        let Some((parts, next)) = self.here.take() else {
            return ApiError::Internal("a request was served twice".into()).into_response();
        };
        let request = Request::from_parts(parts, Body::from(self.bytes.clone()));
        let mut response = next.run(request).await;
        if let Ok(me) = HeaderValue::from_str(self.me()) {
            response.headers_mut().insert(SERVED_BY_HEADER, me);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(address: &str) -> Owner {
        Owner {
            address: address.into(),
            instance: "i".into(),
            epoch: 1,
        }
    }

    #[test]
    fn requests_are_forwarded_only_to_another_address() {
        let me = "http://10.0.0.1:8080";
        assert_eq!(decide(Placement::Here, me), Route::Local);
        assert_eq!(decide(Placement::Unowned, me), Route::Local);
        let other = owner("http://10.0.0.2:8080");
        assert_eq!(
            decide(Placement::Elsewhere(other.clone()), me),
            Route::Forward(other)
        );
        let earlier = owner("http://10.0.0.1:8080/");
        assert_eq!(
            decide(Placement::Elsewhere(earlier.clone()), me),
            Route::Restarted(earlier)
        );
    }
}
