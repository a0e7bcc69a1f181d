//! The Streamable HTTP transport: rmcp's, on a reqwest client with turnstile's TLS setup and
//! the bounds of `MAX_MESSAGE_BYTES`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest_mcp::header::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

use super::MAX_MESSAGE_BYTES;

/// How long opening a connection to an HTTP server may take.
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Requests in flight to one HTTP server at most (rmcp queues the rest): a server is one peer,
/// and sessions calling it at once share it.
const MAX_CONCURRENT_HTTP_REQUESTS: usize = 32;

/// The transport rmcp drives for an HTTP server.
pub(super) type HttpTransport = StreamableHttpClientTransport<reqwest_mcp::Client>;

/// A transport to the endpoint `url`, sending `headers` with every request.
pub(super) fn http(url: &str, headers: &[(String, String)]) -> Result<HttpTransport, String> {
    let client = reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls_config()?)
        .connect_timeout(HTTP_CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
    let mut map = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("{name:?} is not a valid header name"))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header {name} is not valid"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(map)
        .max_concurrent_requests(MAX_CONCURRENT_HTTP_REQUESTS)
        .max_sse_event_size(MAX_MESSAGE_BYTES)
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_error_response_size(64 * 1024)
        .reinit_on_expired_session(true);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// rustls with the `ring` provider and Mozilla's roots, as the rest of turnstile uses.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("cannot set up TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
