//! `/v1/responses` and `/v1/responses/{response}`: the library's [`Responses`] decides what a
//! response is ([`crate::responses`]); these handlers read the request and format the answer —
//! a response object, or its typed events as server-sent events.

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::stream::response_events;
use super::{about, acting_user, refusal};
use crate::http::answer::{checked_idempotency_key, within};
use crate::http::auth::Caller;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::gateway::Gateway;
use crate::http::schema::Refusals;
use crate::responses::{Created, ItemPage, ResponseRequest};

/// `POST /v1/responses`, as documented: the library reads the body field by field
/// ([`ResponseRequest::from_json`]) and refuses, naming it, any field it does not act on.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct CreateResponseBody {
    /// Recorded in the response; the session's agent answers whatever it names.
    model: Option<String>,
    /// A string, or up to 1,025 items: messages (`user`, `assistant`, `system` or `developer`,
    /// text only), `function_call`, `function_call_output` and `mcp_call` items. The last user
    /// message is the turn's; the items before it are written to the session before it.
    #[schema(value_type = Object)]
    input: Value,
    /// Instructions for this turn (with the agent's own system prompt).
    instructions: Option<String>,
    /// The conversation to run in: its id, or `{"id"}`.
    #[schema(value_type = Option<Object>)]
    conversation: Option<Value>,
    /// Continue after this response: in its conversation when it is the newest there, else
    /// in a fork of it taken just after that response.
    previous_response_id: Option<String>,
    /// Up to 16 string pairs, echoed in the answer.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
    /// Answer as server-sent events.
    stream: Option<bool>,
    /// `include_obfuscation` may only be false.
    #[schema(value_type = Option<Object>)]
    stream_options: Option<Value>,
    /// Must be `true` or absent: every response is a stored turn.
    store: Option<bool>,
    /// Answer at once; the response runs on and `GET /v1/responses/{id}` polls it.
    background: Option<bool>,
    /// Function tools the client runs: a call of one ends the response with a `function_call`
    /// item, and a `function_call_output` item continues it.
    #[schema(value_type = Option<Vec<Object>>)]
    tools: Option<Value>,
    /// `auto`, `none`, `required` or `{"type": "function", "name"}`.
    #[schema(value_type = Option<Object>)]
    tool_choice: Option<Value>,
    /// Whether the model may call several tools at once.
    parallel_tool_calls: Option<bool>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}}`.
    #[schema(value_type = Option<Object>)]
    text: Option<Value>,
    /// Sampling temperature.
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
    /// Nucleus sampling.
    #[schema(minimum = 0, maximum = 1)]
    top_p: Option<f64>,
    /// The most tokens the answer may take.
    #[schema(minimum = 1)]
    max_output_tokens: Option<u64>,
    /// Only empty.
    #[schema(value_type = Option<Vec<String>>)]
    include: Option<Value>,
    /// Only `auto`: the session's context window always applies.
    #[schema(pattern = "^auto$")]
    truncation: Option<String>,
}

/// The refusal of a query parameter on a route that takes none (`stream`, `include`, `after`…
/// are not built here), naming it; `None` when there is none.
fn no_query(query: Option<&str>) -> Option<Response> {
    let query = query.filter(|q| !q.is_empty())?;
    let name = query.split('&').next()?.split('=').next().unwrap_or(query);
    let name: String = name.chars().take(64).collect();
    let error = ApiError::BadRequest(format!(
        "the query parameter {name:?} is not supported on this route; leave it out"
    ));
    Some(about(&name, error))
}

/// A response's path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct ResponsePath {
    /// The response's id (`resp_<32 hex>_<conversation>`).
    response: String,
}

/// Creates a response: one turn of the conversation's session (or a new one), answered as a
/// response object when its turn is stored, as OpenAI's typed events (`stream`), or at once
/// (`background`, then polled). Every field is acted on or refused by name
/// (`docs/openai-api.md`).
#[utoipa::path(post, path = "/v1/responses", tag = "openai",
    params(("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$",
        description = "A retry with the same key gets the first attempt's response, stored once")),
    request_body = CreateResponseBody,
    responses((status = 200, description = "The response, or its events",
        content((Object = "application/json"), (String = "text/event-stream"))),
        Refusals))]
pub(crate) async fn create_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    let request = match ResponseRequest::from_json(body) {
        Ok(request) => request,
        Err(error) => return Ok(refusal(error)),
    };
    let key = checked_idempotency_key(&headers)?;
    let timeout = gateway.config().request_timeout;
    // Boxed: the creation's future is large, and this handler's is kept in every request's.
    let created = Box::pin(gateway.responses().create(&user, request, key.as_deref())).await;
    Ok(match created {
        Err(error) => refusal(error),
        Ok(Created::Background(object)) => Json(object).into_response(),
        Ok(Created::Events(events)) => response_events(events, timeout),
        Ok(Created::Finished(finished)) => match within(timeout, false, finished).await? {
            Ok(object) => Json(object).into_response(),
            Err(error) => refusal(error),
        },
    })
}

/// The response: as it stands while its turn runs (`in_progress`), then from its
/// conversation's log.
#[utoipa::path(get, path = "/v1/responses/{response}", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), Refusals))]
pub(crate) async fn get_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    if let Some(refused) = no_query(query.as_deref()) {
        return Ok(refused);
    }
    Ok(match gateway.responses().retrieve(&user, &id).await {
        Ok(object) => Json(object).into_response(),
        Err(error) => refusal(error),
    })
}

/// Interrupts the response's turn, whichever request made it; answers the response once its
/// turn is recorded (`cancelled`, with the partial output), or as it stands when the wait ends
/// first.
#[utoipa::path(post, path = "/v1/responses/{response}/cancel", tag = "openai",
    params(ResponsePath), responses((status = 200, body = Object), Refusals))]
pub(crate) async fn cancel_response(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    if let Some(refused) = no_query(query.as_deref()) {
        return Ok(refused);
    }
    let wait = gateway.config().request_timeout;
    Ok(match gateway.responses().cancel(&user, &id, wait).await {
        Ok(object) => Json(object).into_response(),
        Err(error) => refusal(error),
    })
}

/// The response's input, as items.
#[utoipa::path(get, path = "/v1/responses/{response}/input_items", tag = "openai",
    params(ResponsePath), responses((status = 200, body = ItemPage), Refusals))]
pub(crate) async fn response_input_items(
    State(gateway): State<Gateway>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let user = acting_user(&caller, &headers)?;
    if let Some(refused) = no_query(query.as_deref()) {
        return Ok(refused);
    }
    Ok(match gateway.responses().input_items(&user, &id).await {
        Ok(items) => {
            let count = items.len().max(1);
            Json(ItemPage::of(items, count)).into_response()
        }
        Err(error) => refusal(error),
    })
}
