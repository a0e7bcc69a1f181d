//! [`Gateway`]: the state every handler receives — the channel router (and through it the
//! runtime), the tokens, the metrics handle, the limits and the forwarding client.

use std::sync::{Arc, OnceLock};

use metrics_exporter_prometheus::PrometheusHandle;

use super::auth::Tokens;
use super::config::HttpConfig;
use super::error::ApiError;
use super::forward::Forwarder;
use crate::channel::{Adapters, ChannelRouter};
use crate::responses::Responses;
use crate::{publish_alert_counters, Runtime};

/// The model `GET /v1/models` lists when [`Gateway::with_models`] names none.
pub const DEFAULT_MODEL: &str = "turnstile";

/// The HTTP API over a runtime. Cheap to clone: it is the state every handler receives.
///
/// Every field sits behind one `Arc`: each request clones the gateway for every layer it passes
/// (auth, limits, forwarding, the OpenAI error shaping), and a clone is then one count, not one
/// per field.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    channels: ChannelRouter,
    tokens: Arc<Tokens>,
    metrics: Option<PrometheusHandle>,
    config: Arc<HttpConfig>,
    /// The client forwarded requests go through, built on first use with `config`'s settings.
    forwarder: Arc<OnceLock<Result<Forwarder, String>>>,
    /// The model names `GET /v1/models` lists (what `serve` was started with).
    models: Arc<Vec<String>>,
    /// OpenAI's API over the runtime: it decides what the OpenAI routes answer, and knows the
    /// responses running here.
    responses: Responses,
    /// The channel adapters `serve --channels` runs, if any.
    adapters: Option<Adapters>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("channels", &self.inner.channels)
            .field("metrics", &self.inner.metrics.is_some())
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over the router's runtime and pairing store, with no tokens (everything is
    /// allowed; [`Gateway::serve`] then listens on loopback only), no metrics and default limits.
    pub fn new(channels: ChannelRouter) -> Self {
        let inner = Inner {
            tokens: Arc::new(Tokens::none()),
            metrics: None,
            config: Arc::new(HttpConfig::default()),
            forwarder: Arc::default(),
            models: Arc::new(vec![DEFAULT_MODEL.to_owned()]),
            responses: Responses::new(channels.runtime().clone(), DEFAULT_MODEL),
            adapters: None,
            channels,
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The settings, to change (a builder call, before serving).
    fn settings(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// Lists these model names at `GET /v1/models` (by default one, `turnstile`); the first is
    /// the model a response records when its request names none.
    pub fn with_models(mut self, models: Vec<String>) -> Self {
        let default = models.first().map_or(DEFAULT_MODEL, String::as_str);
        let responses = Responses::new(self.runtime().clone(), default);
        let inner = self.settings();
        inner.responses = responses;
        inner.models = Arc::new(models);
        self
    }

    /// Requires one of these bearer tokens on every route but the probes.
    pub fn with_tokens(mut self, tokens: Tokens) -> Self {
        self.settings().tokens = Arc::new(tokens);
        self
    }

    /// Serves `/metrics` from this Prometheus recorder's handle (the recorder installed), with
    /// the counters an operator alerts on there from the start ([`publish_alert_counters`]).
    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        publish_alert_counters();
        self.settings().metrics = Some(handle);
        self
    }

    /// Replaces the limits.
    pub fn with_config(mut self, config: HttpConfig) -> Self {
        let inner = self.settings();
        inner.config = Arc::new(config);
        inner.forwarder = Arc::default();
        self
    }

    /// Takes the platforms' requests at `/channels/…` with these adapters (start them with
    /// [`Adapters::start`], stop them after the drain with [`Adapters::stop`]).
    pub fn with_adapters(mut self, adapters: Adapters) -> Self {
        self.settings().adapters = Some(adapters);
        self
    }

    /// The channel adapters, if any.
    pub fn adapters(&self) -> Option<&Adapters> {
        self.inner.adapters.as_ref()
    }

    /// The runtime turns go to.
    pub fn runtime(&self) -> &Runtime {
        self.inner.channels.runtime()
    }

    /// The channel router (and through it, the pairing store).
    pub fn channels(&self) -> &ChannelRouter {
        &self.inner.channels
    }

    /// The limits.
    pub fn config(&self) -> &HttpConfig {
        &self.inner.config
    }

    pub(crate) fn tokens(&self) -> &Tokens {
        &self.inner.tokens
    }

    pub(crate) fn models(&self) -> &[String] {
        &self.inner.models
    }

    /// OpenAI's API over the runtime ([`crate::responses`]).
    pub fn responses(&self) -> &Responses {
        &self.inner.responses
    }

    pub(crate) fn metrics(&self) -> Option<&PrometheusHandle> {
        self.inner.metrics.as_ref()
    }

    pub(crate) fn forwarder(&self) -> Result<&Forwarder, ApiError> {
        self.inner
            .forwarder
            .get_or_init(|| Forwarder::new(&self.inner.config).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| ApiError::Internal(e.clone()))
    }
}
