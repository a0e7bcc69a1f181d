//! `turnstile load --target URL[,URL…]`: the workload sent to running `turnstile serve`
//! processes over HTTP, the way their clients reach them. Turns go to
//! `POST /v1/sessions/{u}/{s}/turns` (one JSON answer, or server-sent events when the turn's
//! first chunk matters or its place in the session's order must be known before the next turn
//! is sent), interrupts to `POST …/interrupt`, and the verification pass reads each session back
//! through `GET …/events`, a page at a time. With `--api openai` turns are OpenAI responses
//! instead (`openai.rs`).
//!
//! Nothing is sent anywhere but the given URLs: no proxy from the environment, no redirects.

mod answers;
mod openai;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use tokio::sync::oneshot;
use turnstile::state::Event;
use turnstile::{OverlapPolicy, SessionKey};

use self::answers::{
    acknowledge, error_of, failure_of, failure_of_response, refused_read, unreachable,
};
use super::ledger::turn_of;
use super::options::{Api, Spread};
use super::target::{answered, Ack, Failure, Pending, Target, TargetCounters};
use super::verify::History;
use crate::cli::answer_body::{body_of, MAX_ANSWER_BYTES};
use crate::cli::sse::SseReader;

/// How long connecting to a target may take: a local or same-network `serve` answers in
/// milliseconds, and a refused or black-holed address should fail the probe quickly.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for one turn's whole answer: above `serve`'s default request timeout (60 s),
/// so that the server's own `timeout` answer arrives first.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for a probe, an interrupt or one page of history.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Events read back per request: the most the events endpoint gives in one page.
const PAGE: usize = 1_000;
/// How many times a turn whose request failed before any answer (a connection that broke,
/// such as a pooled one the server had just closed) is sent again. Safe: every turn carries an
/// `Idempotency-Key`, so a turn the server did receive is answered from its history, never run
/// twice.
const RESENDS: usize = 2;

/// How the HTTP target is set up.
pub struct HttpOptions {
    /// Base URLs, checked (`http://…`, no trailing `/`).
    pub bases: Vec<String>,
    /// How turns are spread over them.
    pub spread: Spread,
    /// The bearer token, if the servers want one.
    pub token: Option<String>,
    /// Sent with every turn.
    pub policy: OverlapPolicy,
    /// Makes every turn's `Idempotency-Key` unique to this run.
    pub run_id: String,
    /// Send every turn as events, so that `send` returns once the turn is admitted (`--burst`
    /// above 1, open-loop arrivals).
    pub ordered: bool,
    /// The routes turns go through.
    pub api: Api,
}

/// Running `turnstile serve` processes, reached over HTTP.
pub struct HttpTarget {
    client: Client,
    bases: Vec<String>,
    spread: Spread,
    /// `Bearer …`, marked sensitive so that it never shows in a debug print.
    auth: Option<HeaderValue>,
    policy: OverlapPolicy,
    run_id: String,
    ordered: bool,
    api: Api,
    /// With `--api openai`: each session's conversation, made before the run.
    conversations: OnceLock<openai::Conversations>,
    /// Picks the URL of each turn under `--spread random`.
    next: AtomicU64,
    /// Interrupts the servers said reached a running turn.
    interrupts: AtomicU64,
}

/// One page of `GET …/events`.
#[derive(Debug, Deserialize)]
struct EventsPage {
    events: Vec<Event>,
    next_from: Option<u64>,
}

impl HttpTarget {
    /// A target over `options.bases`.
    pub fn new(options: HttpOptions) -> Result<Self, String> {
        let client = Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        let auth = options
            .token
            .map(|token| {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                    .map_err(|_| "--token holds characters a header cannot carry".to_owned())?;
                value.set_sensitive(true);
                Ok::<_, String>(value)
            })
            .transpose()?;
        Ok(Self {
            client,
            bases: options.bases,
            spread: options.spread,
            auth,
            policy: options.policy,
            run_id: options.run_id,
            ordered: options.ordered,
            api: options.api,
            conversations: OnceLock::new(),
            next: AtomicU64::new(0x9e37_79b9_7f4a_7c15),
            interrupts: AtomicU64::new(0),
        })
    }

    /// The base URLs, as the report names them.
    pub fn bases(&self) -> &[String] {
        &self.bases
    }

    /// Checks, before any load, that every target answers `/healthz` and lets the token read
    /// `key`'s history (a session of the run, so nothing exists yet): a refused connection, a
    /// wrong token or a token that reaches too little is a clear error here, not a run of
    /// failed turns.
    pub async fn probe(&self, key: &SessionKey) -> Result<(), String> {
        for base in &self.bases {
            let health = self
                .client
                .get(format!("{base}/healthz"))
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await
                .map_err(|e| unreachable(base, &e))?;
            if !health.status().is_success() {
                return Err(format!(
                    "{base}/healthz answered {}: is this a running `turnstile serve`?",
                    health.status()
                ));
            }
            let read = self
                .authorized(self.client.get(events_url(base, key, 1, 1)))
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await
                .map_err(|e| unreachable(base, &e))?;
            refused_read(base, read).await?;
        }
        Ok(())
    }

    /// With `--api openai`, makes every session's conversation (at the base its turns would go
    /// to under `--spread hash`); nothing to do otherwise.
    pub async fn open_conversations(&self, keys: &[SessionKey]) -> Result<(), String> {
        if self.api != Api::Openai {
            return Ok(());
        }
        let base_of = |key: &SessionKey| self.bases[self.home(key)].clone();
        let opened = openai::open(
            &self.client,
            keys,
            base_of,
            |r| self.authorized(r),
            &self.run_id,
        )
        .await?;
        let _ = self.conversations.set(opened);
        Ok(())
    }

    /// The session `key`'s turns run in on the servers: itself, or with `--api openai` its
    /// conversation's.
    fn served_as<'a>(&'a self, key: &'a SessionKey) -> &'a SessionKey {
        self.conversations
            .get()
            .and_then(|conversations| conversations.get(key))
            .unwrap_or(key)
    }

    /// `base`'s `/metrics` page, if the token may read it.
    pub async fn metrics(&self, base: &str) -> Option<String> {
        let response = self
            .authorized(self.client.get(format!("{base}/metrics")))
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .ok()?;
        if response.status() != StatusCode::OK {
            return None;
        }
        let body = body_of(response, MAX_ANSWER_BYTES).await.ok()?;
        String::from_utf8(body).ok()
    }

    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.auth {
            Some(auth) => request.header(AUTHORIZATION, auth.clone()),
            None => request,
        }
    }

    /// The base a session's turns go to under `--spread hash`, and where its history is read
    /// (any process of a cluster answers it from the shared store).
    fn home(&self, key: &SessionKey) -> usize {
        (stable_hash(key.to_string().as_bytes()) % self.bases.len() as u64) as usize
    }

    /// The base this turn goes to.
    fn pick(&self, key: &SessionKey) -> usize {
        match self.spread {
            Spread::Hash => self.home(key),
            Spread::Random => {
                let mut x = self
                    .next
                    .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
                x ^= x >> 33;
                x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
                x ^= x >> 33;
                (x % self.bases.len() as u64) as usize
            }
        }
    }

    /// Posts one turn; resends it (same `Idempotency-Key`) when the request failed before any
    /// answer. `Ok` is a 200 answer; any other status is the turn's failure.
    async fn post_turn(
        &self,
        key: &SessionKey,
        input: &str,
        events: bool,
    ) -> Result<Response, Failure> {
        let base = &self.bases[self.pick(key)];
        let (url, body) = match self.api {
            Api::Turnstile => (
                session_url(base, key, "turns"),
                serde_json::json!({"input": input, "policy": self.policy}).to_string(),
            ),
            Api::Openai => (
                format!("{base}/v1/responses"),
                openai::response_body(self.served_as(key), input, events),
            ),
        };
        let idempotency = format!("load-{}-{}", self.run_id, turn_of(input).unwrap_or(0));
        let mut attempts = 0;
        loop {
            let mut request = self
                .authorized(self.client.post(&url))
                .header(CONTENT_TYPE, "application/json")
                .header("idempotency-key", &idempotency)
                .timeout(TURN_TIMEOUT)
                .body(body.clone());
            if events {
                request = request.header(ACCEPT, "text/event-stream");
            }
            if self.api == Api::Openai {
                request = request.header(turnstile::http::USER_HEADER, key.user_id());
            }
            match request.send().await {
                Ok(response) if response.status() == StatusCode::OK => return Ok(response),
                Ok(response) => return Err(failure_of_response(response).await),
                Err(err) if attempts < RESENDS && (err.is_connect() || err.is_request()) => {
                    attempts += 1;
                }
                Err(err) => {
                    tracing::debug!(%err, %url, "a turn's request failed");
                    return Err(Failure::Other);
                }
            }
        }
    }
}

impl Target for HttpTarget {
    async fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> Pending<'a> {
        if self.api == Api::Openai {
            if first_chunk.is_none() && !self.ordered {
                return Box::pin(async move {
                    let response = self.post_turn(key, &input, false).await?;
                    let body = body_of(response, MAX_ANSWER_BYTES)
                        .await
                        .map_err(|_| Failure::Other)?;
                    openai::acknowledge_object(&body)
                });
            }
            // Streamed: the events start once the turn has its place in the FIFO.
            return match self.post_turn(key, &input, true).await {
                Ok(response) => Box::pin(openai::read_events(response, first_chunk)),
                Err(failure) => answered(Err(failure)),
            };
        }
        if first_chunk.is_none() && !self.ordered {
            return Box::pin(async move {
                let response = self.post_turn(key, &input, false).await?;
                let body = body_of(response, MAX_ANSWER_BYTES)
                    .await
                    .map_err(|_| Failure::Other)?;
                acknowledge(&body)
            });
        }
        // The events answer starts once the turn has its place in the session's FIFO, so the
        // next turn of the session may be sent as soon as it is here.
        match self.post_turn(key, &input, true).await {
            Ok(response) => Box::pin(read_events(response, first_chunk)),
            Err(failure) => answered(Err(failure)),
        }
    }

    async fn interrupt<'a>(&'a self, key: &'a SessionKey) -> bool {
        let url = session_url(
            &self.bases[self.pick(key)],
            self.served_as(key),
            "interrupt",
        );
        let answer = self
            .authorized(self.client.post(url))
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await;
        let body = match answer {
            Ok(response) if response.status().is_success() => {
                body_of(response, MAX_ANSWER_BYTES).await.ok()
            }
            _ => None,
        };
        let interrupted = body
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["interrupted"] == true);
        if interrupted {
            self.interrupts.fetch_add(1, Ordering::Relaxed);
        }
        interrupted
    }

    /// Not known from outside; the servers' `/metrics` has `turnstile_live_sessions`.
    fn live_sessions(&self) -> usize {
        0
    }

    fn counters(&self) -> TargetCounters {
        TargetCounters {
            interrupts: self.interrupts.load(Ordering::Relaxed),
            ..TargetCounters::default()
        }
    }

    /// Every acknowledged turn is already durable on the servers: nothing to finish here.
    async fn finish(&self) {}
}

impl History for HttpTarget {
    async fn read<'a>(&'a self, key: &'a SessionKey) -> Result<Vec<Event>, String> {
        let base = &self.bases[self.home(key)];
        let key = self.served_as(key);
        let mut events = Vec::new();
        let mut from = 1;
        loop {
            let response = self
                .authorized(self.client.get(events_url(base, key, from, PAGE)))
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await
                .map_err(|e| format!("verification could not read {key} from {base}: {e}"))?;
            let status = response.status();
            let body = response
                .bytes()
                .await
                .map_err(|e| format!("verification could not read {key} from {base}: {e}"))?;
            if status != StatusCode::OK {
                let detail = error_of(&body);
                return Err(format!(
                    "verification could not read {key} from {base}: {status} {} {}",
                    detail.code, detail.message
                ));
            }
            let page: EventsPage = serde_json::from_slice(&body).map_err(|e| {
                format!("verification could not read {key} from {base}: bad page: {e}")
            })?;
            events.extend(page.events);
            match page.next_from {
                Some(next) if next > from => from = next,
                _ => return Ok(events),
            }
        }
    }
}

/// Reads a turn's events: times its first chunk, and acknowledges its outcome.
async fn read_events(
    response: Response,
    mut first_chunk: Option<oneshot::Sender<()>>,
) -> Result<Ack, Failure> {
    let mut body = response.bytes_stream();
    let mut reader = SseReader::default();
    while let Some(bytes) = body.next().await {
        let bytes = bytes.map_err(|_| Failure::Other)?;
        for event in reader.push(&bytes).map_err(|_| Failure::Other)? {
            match event.name.as_str() {
                "chunk" => {
                    if let Some(signal) = first_chunk.take() {
                        let _ = signal.send(());
                    }
                }
                "outcome" => return acknowledge(event.data.as_bytes()),
                "error" => {
                    let detail = error_of(event.data.as_bytes());
                    return Err(failure_of(None, &detail.code));
                }
                _ => {}
            }
        }
    }
    // The stream ended without an outcome: the connection broke.
    Err(Failure::Other)
}

/// `{base}/v1/sessions/{user}/{session}/{action}`, ids percent-encoded.
fn session_url(base: &str, key: &SessionKey, action: &str) -> String {
    format!(
        "{base}/v1/sessions/{}/{}/{action}",
        encode(key.user_id()),
        encode(key.session_id())
    )
}

fn events_url(base: &str, key: &SessionKey, from: u64, limit: usize) -> String {
    format!(
        "{}?from={from}&limit={limit}",
        session_url(base, key, "events")
    )
}

/// Percent-encodes a path segment: everything but unreserved characters.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A hash that stays the same across runs, builds and machines, so `--spread hash` sends a
/// session to the same process every time: FNV-1a, then MurmurHash3's finaliser. FNV-1a alone
/// spreads badly modulo small numbers: its lowest bit is the parity of the bytes' lowest bits,
/// the same for every key whose variable digits appear twice (as in the load's keys).
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_encode_ids_and_hashes_are_stable() {
        let key = SessionKey::new("a b", "x/y").unwrap();
        assert_eq!(
            session_url("http://h", &key, "turns"),
            "http://h/v1/sessions/a%20b/x%2Fy/turns"
        );
        assert_eq!(
            stable_hash(b"user1/load-x-1"),
            stable_hash(b"user1/load-x-1")
        );
        // The load's keys repeat their number: both halves still get about half of them.
        let odd = (0..1_000)
            .filter(|i| stable_hash(format!("user{i}/load-ab12cd34-{i}").as_bytes()) % 2 == 1)
            .count();
        assert!((400..600).contains(&odd), "{odd} of 1000");
    }
}
