//! Artifacts over HTTP: `PUT`/`GET /v1/sessions/{user}/{session}/artifacts/{name}`, the
//! listing and the versions of a name, and the same under `/v1/users/{user}/artifacts` for a
//! user's own artifacts. Uploads are read as a stream and refused with 413 as soon as they pass
//! the store's size limit, so an endless or 1 GiB body is never buffered whole.
//!
//! These routes read and write the artifact store directly (any process answers them); an
//! upload is not a turn, so it records no `artifact_saved` event.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use utoipa::IntoParams;

use super::auth::session_key;
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::gateway::Gateway;
use super::schema::Refusals;
use crate::artifact::{ArtifactError, ArtifactScope, ArtifactStore};
use crate::Error;

/// The type of an upload that names none.
const DEFAULT_MIME: &str = "application/octet-stream";

/// `?version=N` on a read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionQuery {
    /// The version to read (1 or more); the newest when absent.
    #[param(minimum = 1)]
    version: Option<u64>,
}

// The structs below only describe path parameters to the document; handlers read the path
// as tuples.

/// A session artifact's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct SessionArtifactPath {
    /// The user id.
    user: String,
    /// The session id.
    session: String,
    /// The artifact's name: 1–200 bytes, no `/`, `\\`, `..` or control characters.
    #[param(min_length = 1, max_length = 200)]
    name: String,
}

/// A user artifact's path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub(crate) struct UserArtifactPath {
    /// The user id.
    user: String,
    /// The artifact's name: 1–200 bytes, no `/`, `\\`, `..` or control characters.
    #[param(min_length = 1, max_length = 200)]
    name: String,
}

fn failed(error: ArtifactError) -> ApiError {
    ApiError::Runtime(Error::Artifacts(Arc::new(error)))
}

fn store(gateway: &Gateway) -> Result<Arc<dyn ArtifactStore>, ApiError> {
    gateway
        .runtime()
        .artifacts()
        .cloned()
        .ok_or_else(|| failed(ArtifactError::NotConfigured))
}

fn session_scope(
    caller: &Caller,
    user: String,
    session: String,
) -> Result<ArtifactScope, ApiError> {
    Ok(ArtifactScope::Session(session_key(caller, user, session)?))
}

fn user_scope(caller: &Caller, user: String) -> Result<ArtifactScope, ApiError> {
    caller.require_user(&user)?;
    Ok(ArtifactScope::user(user)?)
}

/// Reads a body chunk by chunk, refusing it with 413 (`too_large`) as soon as it passes
/// `limit`: a declared length past the limit is refused before anything is read.
async fn read_limited(
    body: Body,
    headers: &HeaderMap,
    name: &str,
    limit: u64,
) -> Result<Vec<u8>, ApiError> {
    let too_large = |bytes| {
        failed(ArtifactError::TooLarge {
            name: name.to_owned(),
            bytes,
            limit,
        })
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(declared) = declared.filter(|&n| n > limit) {
        return Err(too_large(declared));
    }
    let capacity = declared.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let mut bytes = Vec::with_capacity(capacity);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| match super::deadline::timed_out(&e) {
            Some(after) => ApiError::BodyTimeout { after },
            None => ApiError::BadBody(format!("reading the upload: {e}")),
        })?;
        let total = (bytes.len() + chunk.len()) as u64;
        if total > limit {
            return Err(too_large(total));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

async fn put(
    gateway: &Gateway,
    scope: ArtifactScope,
    name: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let store = store(gateway)?;
    crate::artifact::validate_name(name).map_err(failed)?;
    let mime = match headers.get(header::CONTENT_TYPE) {
        Some(value) => value.to_str().map_err(|_| {
            failed(ArtifactError::InvalidMime {
                mime: "(not ASCII)".into(),
            })
        })?,
        None => DEFAULT_MIME,
    };
    crate::artifact::validate_mime(mime).map_err(failed)?;
    let bytes = read_limited(body, headers, name, store.max_bytes()).await?;
    let version = store
        .save(&scope, name, &bytes, mime)
        .await
        .map_err(failed)?;
    Ok(Json(json!({ "version": version })))
}

async fn get(
    gateway: &Gateway,
    scope: ArtifactScope,
    name: &str,
    version: Option<u64>,
) -> Result<Response, ApiError> {
    let store = store(gateway)?;
    let Some(artifact) = store.load(&scope, name, version).await.map_err(failed)? else {
        let which = version.map_or_else(|| "any version".to_owned(), |v| format!("version {v}"));
        return Err(ApiError::NotFound(format!(
            "no artifact {name:?} ({which}) in this {}",
            match scope {
                ArtifactScope::Session(_) => "session",
                ArtifactScope::User(_) => "user",
            }
        )));
    };
    let mime = HeaderValue::from_str(&artifact.meta.mime)
        .unwrap_or(HeaderValue::from_static(DEFAULT_MIME));
    let headers = [
        (header::CONTENT_TYPE, mime),
        // Stored bytes are anyone's upload: a browser must not sniff or render them inline.
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        ),
        (
            header::HeaderName::from_static("x-artifact-version"),
            HeaderValue::from(artifact.meta.version),
        ),
    ];
    Ok((headers, artifact.data).into_response())
}

async fn list(gateway: &Gateway, scope: ArtifactScope) -> Result<Json<Value>, ApiError> {
    let artifacts = store(gateway)?.list(&scope).await.map_err(failed)?;
    Ok(Json(json!({ "artifacts": artifacts })))
}

async fn versions(
    gateway: &Gateway,
    scope: ArtifactScope,
    name: &str,
) -> Result<Json<Value>, ApiError> {
    let versions = store(gateway)?
        .versions(&scope, name)
        .await
        .map_err(failed)?;
    if versions.is_empty() {
        return Err(ApiError::NotFound(format!("no artifact {name:?}")));
    }
    Ok(Json(json!({ "name": name, "versions": versions })))
}

#[utoipa::path(put, path = "/v1/sessions/{user}/{session}/artifacts/{name}", tag = "artifacts", params(SessionArtifactPath),
    request_body(content = Option<String>, content_type = "application/octet-stream",
        description = "The bytes; `Content-Type` is kept as their MIME type"),
    responses((status = 200, description = "`{\"version\": N}`", body = Object), Refusals))]
pub(crate) async fn put_session_artifact(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session, name)): ApiPath<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let scope = session_scope(&caller, user, session)?;
    put(&gateway, scope, &name, &headers, body).await
}

#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/artifacts/{name}", tag = "artifacts",
    params(SessionArtifactPath, VersionQuery),
    responses((status = 200, description = "The bytes, with their saved `Content-Type`",
        content_type = "application/octet-stream", body = String), Refusals))]
pub(crate) async fn get_session_artifact(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session, name)): ApiPath<(String, String, String)>,
    ApiQuery(query): ApiQuery<VersionQuery>,
) -> Result<Response, ApiError> {
    let scope = session_scope(&caller, user, session)?;
    get(&gateway, scope, &name, query.version).await
}

#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/artifacts", tag = "artifacts", params(super::schema::SessionPath),
    responses((status = 200, description = "`{\"artifacts\": [meta…]}`", body = Object), Refusals))]
pub(crate) async fn list_session_artifacts(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    list(&gateway, session_scope(&caller, user, session)?).await
}

#[utoipa::path(get, path = "/v1/sessions/{user}/{session}/artifacts/{name}/versions", tag = "artifacts",
    params(SessionArtifactPath),
    responses((status = 200, description = "`{\"name\", \"versions\": [meta…]}`", body = Object), Refusals))]
pub(crate) async fn session_artifact_versions(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, session, name)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let scope = session_scope(&caller, user, session)?;
    versions(&gateway, scope, &name).await
}

#[utoipa::path(put, path = "/v1/users/{user}/artifacts/{name}", tag = "artifacts", params(UserArtifactPath),
    request_body(content = Option<String>, content_type = "application/octet-stream",
        description = "The bytes; `Content-Type` is kept as their MIME type"),
    responses((status = 200, description = "`{\"version\": N}`", body = Object), Refusals))]
pub(crate) async fn put_user_artifact(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, name)): ApiPath<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let scope = user_scope(&caller, user)?;
    put(&gateway, scope, &name, &headers, body).await
}

#[utoipa::path(get, path = "/v1/users/{user}/artifacts/{name}", tag = "artifacts",
    params(UserArtifactPath, VersionQuery),
    responses((status = 200, description = "The bytes, with their saved `Content-Type`",
        content_type = "application/octet-stream", body = String), Refusals))]
pub(crate) async fn get_user_artifact(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, name)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<VersionQuery>,
) -> Result<Response, ApiError> {
    let scope = user_scope(&caller, user)?;
    get(&gateway, scope, &name, query.version).await
}

#[utoipa::path(get, path = "/v1/users/{user}/artifacts", tag = "artifacts", params(super::schema::UserPath),
    responses((status = 200, description = "`{\"artifacts\": [meta…]}`", body = Object), Refusals))]
pub(crate) async fn list_user_artifacts(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    list(&gateway, user_scope(&caller, user)?).await
}

#[utoipa::path(get, path = "/v1/users/{user}/artifacts/{name}/versions", tag = "artifacts",
    params(UserArtifactPath),
    responses((status = 200, description = "`{\"name\", \"versions\": [meta…]}`", body = Object), Refusals))]
pub(crate) async fn user_artifact_versions(
    State(gateway): State<Gateway>,
    caller: Caller,
    ApiPath((user, name)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let scope = user_scope(&caller, user)?;
    versions(&gateway, scope, &name).await
}

/// The artifact routes, grouped so that the gateway adds them in one place. They carry no
/// forwarding layer: the artifact store answers them from any process.
pub(super) fn routes() -> axum::Router<Gateway> {
    use axum::routing::get;
    let session = "/v1/sessions/{user}/{session}/artifacts";
    let user = "/v1/users/{user}/artifacts";
    axum::Router::new()
        .route(session, get(list_session_artifacts))
        .route(
            &format!("{session}/{{name}}"),
            get(get_session_artifact).put(put_session_artifact),
        )
        .route(
            &format!("{session}/{{name}}/versions"),
            get(session_artifact_versions),
        )
        .route(user, get(list_user_artifacts))
        .route(
            &format!("{user}/{{name}}"),
            get(get_user_artifact).put(put_user_artifact),
        )
        .route(
            &format!("{user}/{{name}}/versions"),
            get(user_artifact_versions),
        )
}
