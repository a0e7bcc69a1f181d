//! Which session an OpenAI request is about, read before it runs, so that several processes
//! can send it to the one that owns that session (`docs/openai-api.md`, "Several processes").
//!
//! The answer is the session the handler itself would use: the conversation in the path, the
//! conversation a response id names, a response body's `conversation` or
//! `previous_response_id` (a fork of it runs where its source lives), the conversation a
//! creation or a response with an `Idempotency-Key` made the first time (so that a retry reaches
//! it), or a chat completion's [`SESSION_HEADER`]. Path segments are read percent-decoded, as
//! the handlers read them.
//! `None` means "serve it here": a new conversation, a model listing, a stateless chat
//! completion, or a request the handler refuses anyway (its refusal is then the answer).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use serde::Deserialize;

use super::{acting_user, SESSION_HEADER};
use crate::http::answer::checked_idempotency_key;
use crate::http::auth::Caller;
use crate::http::forward::{read_body, route_keyed};
use crate::http::gateway::Gateway;
use crate::key::SessionKey;
use crate::responses::{conversation_key, new_id, ResponseId};

/// Middleware of the OpenAI routes under forwarding: the session is the one [`session_of`]
/// names; a request that names none (or an unauthorised one, refused by its handler) is
/// served here.
pub(crate) async fn openai_route(
    State(gateway): State<Gateway>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(caller) = Caller::from_request_parts(&mut parts, &gateway).await else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    let bytes = match read_body(&parts, body, &gateway).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let key = session_of(
        &caller,
        &parts.method,
        parts.uri.path(),
        &parts.headers,
        &bytes,
    );
    route_keyed(gateway, key, parts, bytes, next).await
}

/// The fields of `POST /v1/responses` that say where it runs; the rest is the handler's.
#[derive(Deserialize)]
struct Placement {
    #[serde(default)]
    conversation: Option<ConversationRef>,
    #[serde(default)]
    previous_response_id: Option<String>,
}

/// A conversation named by id, or as an object.
#[derive(Deserialize)]
#[serde(untagged)]
enum ConversationRef {
    Id(String),
    Object { id: String },
}

/// The session the request `method path` (with `headers` and `body`) runs in, when it names
/// one: see the module's documentation.
pub(crate) fn session_of(
    caller: &Caller,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<SessionKey> {
    let user = acting_user(caller, headers).ok()?;
    let decoded: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|segment| {
            percent_decode_str(segment)
                .decode_utf8()
                .ok()
                .map(String::from)
        })
        .collect::<Option<_>>()?;
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    // A new conversation: a retry's is the one its first attempt made.
    let retried = || {
        let key = checked_idempotency_key(headers).ok()??;
        Some(new_id("conv_", Some(&format!("{user}\0{key}"))))
    };
    match (method, segments.as_slice()) {
        (&Method::POST, ["v1", "conversations"]) => conversation_key(&user, &retried()?).ok(),
        (_, ["v1", "conversations", conversation, ..]) => {
            conversation_key(&user, conversation).ok()
        }
        (_, ["v1", "responses", response, ..]) => {
            let id = ResponseId::parse(response)?;
            conversation_key(&user, &id.conversation).ok()
        }
        (&Method::POST, ["v1", "responses"]) => {
            let placement: Placement = serde_json::from_slice(body).ok()?;
            let conversation = match (placement.conversation, placement.previous_response_id) {
                (Some(ConversationRef::Id(id) | ConversationRef::Object { id }), None) => id,
                (None, Some(previous)) => ResponseId::parse(&previous)?.conversation,
                (None, None) => retried()?,
                (Some(_), Some(_)) => return None,
            };
            conversation_key(&user, &conversation).ok()
        }
        (&Method::POST, ["v1", "chat", "completions"]) => {
            let session = headers.get(SESSION_HEADER)?.to_str().ok()?;
            SessionKey::new(user, session).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn alice() -> Caller {
        Caller::User {
            id: "alice".into(),
            channels: Vec::new(),
        }
    }

    fn of(method: Method, path: &str, headers: &HeaderMap, body: serde_json::Value) -> String {
        let body = serde_json::to_vec(&body).unwrap();
        session_of(&alice(), &method, path, headers, &body)
            .map(|k| k.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn conversation_and_response_paths_name_their_session() {
        let none = HeaderMap::new();
        let response = ResponseId::new("conv_a", None).to_string();
        assert_eq!(
            of(
                Method::GET,
                "/v1/conversations/conv_a/items",
                &none,
                json!(null)
            ),
            "alice/conv_a"
        );
        assert_eq!(
            of(
                Method::POST,
                &format!("/v1/responses/{response}/cancel"),
                &none,
                json!(null)
            ),
            "alice/conv_a"
        );
        assert_eq!(
            of(Method::GET, "/v1/responses/resp_bogus", &none, json!(null)),
            "",
            "not an id this gateway made: served (and refused) here"
        );
        assert_eq!(
            of(
                Method::GET,
                "/v1/conversations/conv%5Fa%2Dz/items",
                &none,
                json!(null)
            ),
            "alice/conv_a-z",
            "decoded as the handler decodes it"
        );
        assert_eq!(
            of(Method::POST, "/v1/conversations", &none, json!({})),
            "",
            "a new conversation: here"
        );
        let mut retry = HeaderMap::new();
        retry.insert("idempotency-key", HeaderValue::from_static("c1"));
        assert_eq!(
            of(Method::POST, "/v1/conversations", &retry, json!({})),
            format!("alice/{}", new_id("conv_", Some("alice\0c1"))),
            "a retried creation goes where its first attempt made it"
        );
        assert_eq!(of(Method::GET, "/v1/models", &none, json!(null)), "");
    }

    #[test]
    fn a_new_response_runs_where_its_body_or_its_retry_key_says() {
        let mut headers = HeaderMap::new();
        let previous = ResponseId::new("conv_p", None).to_string();
        let post = |headers: &HeaderMap, body| of(Method::POST, "/v1/responses", headers, body);
        assert_eq!(
            post(&headers, json!({"input": "x", "conversation": "conv_a"})),
            "alice/conv_a"
        );
        assert_eq!(
            post(
                &headers,
                json!({"input": "x", "conversation": {"id": "conv_b"}})
            ),
            "alice/conv_b"
        );
        assert_eq!(
            post(
                &headers,
                json!({"input": "x", "previous_response_id": previous})
            ),
            "alice/conv_p"
        );
        assert_eq!(post(&headers, json!({"input": "x"})), "", "a new one, here");
        headers.insert("idempotency-key", HeaderValue::from_static("k1"));
        let first = post(&headers, json!({"input": "x"}));
        assert_eq!(
            first,
            format!("alice/{}", new_id("conv_", Some("alice\0k1"))),
            "a retry goes where its first attempt made the conversation"
        );
        assert_eq!(
            post(
                &headers,
                json!({"input": "x", "conversation": "c", "previous_response_id": previous})
            ),
            "",
            "refused by the handler, here"
        );
    }

    #[test]
    fn a_chat_completion_runs_in_the_session_its_header_names() {
        let mut headers = HeaderMap::new();
        let post = |headers: &HeaderMap| {
            of(
                Method::POST,
                "/v1/chat/completions",
                headers,
                json!({"messages": []}),
            )
        };
        assert_eq!(post(&headers), "", "stateless: here");
        headers.insert(SESSION_HEADER, HeaderValue::from_static("s1"));
        assert_eq!(post(&headers), "alice/s1");
    }
}
