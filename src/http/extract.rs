//! axum's extractors, with their rejections answered as [`ApiError`]s (a JSON body) instead of
//! axum's plain-text ones.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::gateway::Gateway;

/// A JSON body; `Content-Type: application/json` required.
pub(crate) struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Gateway> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, gateway: &Gateway) -> Result<Self, ApiError> {
        match Json::<T>::from_request(request, gateway).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::UnsupportedMediaType),
            Err(JsonRejection::BytesRejection(e)) => Err(bytes_rejection(&e, gateway)),
            Err(e) => Err(ApiError::BadBody(e.body_text())),
        }
    }
}

/// A JSON body that may be absent: an empty body or `null` is `None`, whatever its content type;
/// anything else must be a JSON object.
pub(crate) struct OptionalJson<T>(pub Option<T>);

impl<T: DeserializeOwned> FromRequest<Gateway> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, gateway: &Gateway) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, gateway)
            .await
            .map_err(|e| bytes_rejection(&e, gateway))?;
        // An empty body, or JSON `null`, is no body.
        if bytes.iter().all(u8::is_ascii_whitespace) || bytes.trim_ascii() == b"null" {
            return Ok(Self(None));
        }
        // Every optional body is an object: serde would also read a struct from an array.
        if !bytes.trim_ascii().starts_with(b"{") {
            return Err(ApiError::BadBody("the body must be a JSON object".into()));
        }
        serde_json::from_slice(&bytes)
            .map(|value| Self(Some(value)))
            .map_err(|e| ApiError::BadBody(e.to_string()))
    }
}

pub(crate) fn bytes_rejection(rejection: &BytesRejection, gateway: &Gateway) -> ApiError {
    if let Some(after) = super::deadline::timed_out(rejection) {
        return ApiError::BodyTimeout { after };
    }
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge {
            limit: gateway.config().body_limit,
        }
    } else {
        ApiError::BadBody(rejection.body_text())
    }
}

/// Path parameters, percent-decoded.
pub(crate) struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<Gateway> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gateway: &Gateway) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, gateway)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|e| ApiError::BadRequest(e.body_text()))
    }
}

/// Query parameters.
pub(crate) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned> FromRequestParts<Gateway> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gateway: &Gateway) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, gateway)
            .await
            .map(|Query(value)| Self(value))
            .map_err(|e| ApiError::BadRequest(e.body_text()))
    }
}
