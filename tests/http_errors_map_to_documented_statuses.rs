//! Every refusal of the HTTP API has its documented status and a body
//! `{"error": {"code", "message"}}`; a server error never shows internal detail.

#![cfg(feature = "http")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;
use support::harness::*;
use support::http::*;
use turnstile::state::{Event, Seq};
use turnstile::store::FaultyStore;
use turnstile::store::{GcPolicy, GcReport, LoadedSession, Page, PageRequest};
use turnstile::{
    http::HttpConfig, EchoAgent, InMemoryStore, Runtime, SessionKey, Store, StoreError,
};

/// A gateway whose agent holds turns whose input starts with "hold" until released.
fn gated(builder: turnstile::RuntimeBuilder, config: HttpConfig) -> (TestGateway, Arc<GateAgent>) {
    let agent = Arc::new(GateAgent::default());
    let gw = TestGateway::with(builder.agent_arc(agent.clone()), config);
    (gw, agent)
}

/// Starts a held turn on `session` of alice and waits until the agent runs it.
async fn hold(
    gw: &TestGateway,
    agent: &GateAgent,
    session: &str,
) -> tokio::task::JoinHandle<(StatusCode, serde_json::Value)> {
    let before = agent.entered.load(std::sync::atomic::Ordering::SeqCst);
    let router = gw.router();
    let uri = format!("/v1/sessions/alice/{session}/turns");
    let task = tokio::spawn(async move {
        use tower::ServiceExt;
        let response = router
            .oneshot(post(&uri, ALICE, json!({"input": "hold"})))
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    });
    eventually("the held turn runs", || {
        agent.entered.load(std::sync::atomic::Ordering::SeqCst) > before
    })
    .await;
    task
}

#[tokio::test]
async fn bad_ids_and_bodies_are_400() {
    // Property: a key rule broken in the path, malformed JSON, an unknown field, a missing
    // field and a bad query are each a 400 with their own code.
    let gw = TestGateway::new(EchoAgent);
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/a%0Ab/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_key"),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("control character"), "{message}");

    let raw = Request::builder()
        .method(Method::POST)
        .uri("/v1/sessions/alice/s/turns")
        .header("authorization", format!("Bearer {ALICE}"))
        .header("content-type", "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    assert_eq!(code(&gw.send(raw).await.1), "bad_body");
    for bad in [json!({"input": "x", "colour": "red"}), json!({"text": "x"})] {
        let (status, body) = gw
            .send(post("/v1/sessions/alice/s/turns", ALICE, bad))
            .await;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "bad_body"));
    }
    for query in ["limit=0", "limit=1001", "limit=ten"] {
        let uri = format!("/v1/users/alice/sessions?{query}");
        let (status, body) = gw.send(get(&uri, ALICE)).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{query}"
        );
    }
    let pairing = request(
        Method::PUT,
        "/v1/pairings/sl%20ack/U1",
        Some(ADMIN),
        Some(json!({"user": "a"})),
    );
    assert_eq!(code(&gw.send(pairing).await.1), "invalid_field");
    let reserved = request(
        Method::PUT,
        "/v1/pairings/slack/U1",
        Some(ADMIN),
        Some(json!({"user": "channel:web"})),
    );
    assert_eq!(code(&gw.send(reserved).await.1), "reserved_user");
}

#[tokio::test]
async fn missing_or_unknown_tokens_are_401_with_a_bearer_challenge() {
    // Property: no token, an unknown token, or another scheme is 401 and names Bearer.
    let gw = TestGateway::new(EchoAgent);
    let cases = [
        request(Method::GET, "/v1/sessions/alice/s", None, None),
        get("/v1/sessions/alice/s", "not-a-configured-token-at-all"),
        Request::builder()
            .uri("/v1/sessions/alice/s")
            .header("authorization", format!("Basic {ALICE}"))
            .body(Body::empty())
            .unwrap(),
        request(
            Method::POST,
            "/v1/channels/slack/messages",
            None,
            Some(json!({"chat": "C", "user": "U", "input": "hi"})),
        ),
        request(Method::GET, "/metrics", None, None),
        request(
            Method::POST,
            "/v1/sessions/alice/s/fork",
            None,
            Some(json!({"to": "t"})),
        ),
        request(
            Method::PUT,
            "/v1/pairings/slack/U",
            None,
            Some(json!({"user": "alice"})),
        ),
    ];
    for request in cases {
        let (status, headers, text) = gw.send_raw(request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
        assert_eq!(headers["www-authenticate"], "Bearer");
        assert!(text.contains("\"unauthorized\""), "{text}");
    }
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    // Property: fallbacks answer the same JSON error body as everything else.
    let gw = TestGateway::new(EchoAgent);
    let (status, body) = gw.send(get("/v2/nothing", ADMIN)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    let (status, body) = gw
        .send(request(
            Method::PATCH,
            "/v1/sessions/alice/s",
            Some(ALICE),
            None,
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
}

#[tokio::test]
async fn a_busy_session_refusing_is_409() {
    // Property: the `reject` policy on a session with a running turn is 409 `busy`.
    let (gw, agent) = gated(Runtime::builder(), HttpConfig::default());
    let held = hold(&gw, &agent, "s").await;
    let body = json!({"input": "now", "policy": "reject"});
    let (status, answer) = gw
        .send(post("/v1/sessions/alice/s/turns", ALICE, body))
        .await;
    assert_eq!((status, code(&answer)), (StatusCode::CONFLICT, "busy"));
    // The same as server-sent events: the refusal is known before any stream begins, so it is
    // the same 409 JSON answer, not a 200 with an `error` event.
    let mut sse = post(
        "/v1/sessions/alice/s/turns",
        ALICE,
        json!({"input": "now", "policy": "reject"}),
    );
    sse.headers_mut().insert(
        header::ACCEPT,
        header::HeaderValue::from_static("text/event-stream"),
    );
    let (status, headers, text) = gw.send_raw(sse).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{headers:?}"
    );
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(code(&answer), "busy");
    agent.gate.add_permits(1);
    assert_eq!(within(held).await.unwrap().0, StatusCode::OK);
    // Admitted under `reject` (the session is idle now), the turn streams as usual.
    agent.gate.add_permits(1);
    let mut sse = post(
        "/v1/sessions/alice/s/turns",
        ALICE,
        json!({"input": "again", "policy": "reject"}),
    );
    sse.headers_mut().insert(
        header::ACCEPT,
        header::HeaderValue::from_static("text/event-stream"),
    );
    let (status, _, text) = within(gw.send_raw(sse)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events = parse_events(&text);
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("outcome"),
        "{text}"
    );
}

#[tokio::test]
async fn bodies_and_inputs_over_their_limits_are_413() {
    // Property: a body over the gateway's limit, and an input over the runtime's, are 413.
    let config = HttpConfig {
        body_limit: 1_024,
        ..HttpConfig::default()
    };
    let gw = TestGateway::with(
        Runtime::builder()
            .agent(EchoAgent)
            .with_max_input_bytes(100),
        config,
    );
    let big = json!({"input": "x".repeat(2_000)});
    let (status, body) = gw
        .send(post("/v1/sessions/alice/s/turns", ALICE, big))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        "{body}"
    );
    let long = json!({"input": "x".repeat(200)});
    let (status, body) = gw
        .send(post("/v1/sessions/alice/s/turns", ALICE, long))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
        "{body}"
    );
}

#[tokio::test]
async fn a_body_without_a_json_content_type_is_415() {
    // Property: JSON routes need `Content-Type: application/json`.
    let gw = TestGateway::new(EchoAgent);
    let request = Request::builder()
        .method(Method::POST)
        .uri("/v1/sessions/alice/s/turns")
        .header("authorization", format!("Bearer {ALICE}"))
        .body(Body::from(r#"{"input": "x"}"#))
        .unwrap();
    let (status, body) = gw.send(request).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
    );
}

#[tokio::test]
async fn a_full_queue_is_429_overloaded() {
    // Property: past `max_queue` waiting messages a turn is 429 `overloaded`, with Retry-After.
    let (gw, agent) = gated(Runtime::builder().with_max_queue(1), HttpConfig::default());
    let held = hold(&gw, &agent, "s").await;
    let queued = tokio::spawn({
        let router = gw.router();
        async move {
            use tower::ServiceExt;
            router
                .oneshot(post(
                    "/v1/sessions/alice/s/turns",
                    ALICE,
                    json!({"input": "next"}),
                ))
                .await
                .unwrap()
                .status()
        }
    });
    let key = SessionKey::new("alice", "s").unwrap();
    eventually("one message waits", || gw.runtime().pending(&key) == 2).await;
    let (status, headers, text) = gw
        .send_raw(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "more"}),
        ))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert!(text.contains("\"overloaded\""), "{text}");
    assert_eq!(headers["retry-after"], "1");
    agent.gate.add_permits(1);
    assert_eq!(within(held).await.unwrap().0, StatusCode::OK);
    assert_eq!(within(queued).await.unwrap(), StatusCode::OK);
}

#[tokio::test]
async fn runtime_wide_limits_are_429_with_their_own_codes() {
    // Property: the concurrency limit and the capacity each answer 429 with their own code.
    let builder = Runtime::builder().with_max_concurrent_turns(1, Duration::ZERO);
    let (gw, agent) = gated(builder, HttpConfig::default());
    let held = hold(&gw, &agent, "a").await;
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/b/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::TOO_MANY_REQUESTS, "concurrency_limit_exceeded")
    );
    agent.gate.add_permits(1);
    within(held).await.unwrap();

    let (gw, agent) = gated(Runtime::builder().with_capacity(1), HttpConfig::default());
    let held = hold(&gw, &agent, "a").await;
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/b/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::TOO_MANY_REQUESTS, "at_capacity")
    );
    agent.gate.add_permits(1);
    within(held).await.unwrap();
}

#[tokio::test]
async fn a_draining_runtime_answers_503_and_readyz_turns_503() {
    // Property: once draining, new turns are 503 `draining` and /readyz is 503; the turn that
    // was running still completes.
    let (gw, agent) = gated(Runtime::builder(), HttpConfig::default());
    let held = hold(&gw, &agent, "s").await;
    let runtime = gw.runtime().clone();
    let drain = tokio::spawn(async move { runtime.drain(TIMEOUT).await });
    eventually("draining begins", || gw.runtime().is_draining()).await;
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/t/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    );
    let (status, body) = gw.send(request(Method::GET, "/readyz", None, None)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    );
    agent.gate.add_permits(1);
    let (status, answer) = within(held).await.unwrap();
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (StatusCode::OK, Some("completed"))
    );
    assert!(within(drain).await.unwrap().clean);
}

#[tokio::test(start_paused = true)]
async fn an_event_stream_longer_than_the_request_timeout_is_not_cut() {
    // Property: for server-sent events the request timeout bounds the silence between events,
    // not the whole reply: a 6 s reply streaming a chunk every second, behind a 2 s timeout,
    // ends with its `outcome` event.
    let config = HttpConfig {
        request_timeout: Duration::from_secs(2),
        ..HttpConfig::default()
    };
    let agent = turnstile::MockLlmAgent::new()
        .with_latency(Duration::from_secs(6))
        .with_chunks(6);
    let gw = TestGateway::with(Runtime::builder().agent(agent), config);
    let mut request = post(
        "/v1/sessions/alice/long/turns",
        ALICE,
        json!({"input": "tell me everything"}),
    );
    request
        .headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    let (status, _, text) = gw.send_raw(request).await;
    assert_eq!(status, StatusCode::OK);
    let events = parse_events(&text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.last(), Some(&"outcome"), "{text}");
    assert_eq!(events.last().unwrap().1["outcome"], "completed");
    assert_eq!(names.iter().filter(|n| **n == "chunk").count(), 6, "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_request_is_504_and_its_turn_goes_on_unless_asked() {
    // Property: past the request timeout the answer is 504 `timeout`; the turn keeps running
    // and is stored completed, unless the request set `cancel_on_timeout`, which interrupts it.
    let config = HttpConfig {
        request_timeout: Duration::from_secs(5),
        ..HttpConfig::default()
    };
    let (gw, agent) = gated(Runtime::builder(), config);
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "hold 1"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GATEWAY_TIMEOUT, "timeout")
    );
    let key = SessionKey::new("alice", "s").unwrap();
    assert_eq!(gw.runtime().pending(&key), 1, "the turn still runs");
    agent.gate.add_permits(1);
    eventually("the turn completes", || gw.runtime().pending(&key) == 0).await;

    let cancel = json!({"input": "hold 2", "cancel_on_timeout": true});
    let (status, body) = gw
        .send(post("/v1/sessions/alice/s/turns", ALICE, cancel))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::GATEWAY_TIMEOUT, "timeout")
    );
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("interrupted"));
    eventually("the turn is interrupted", || {
        gw.runtime().pending(&key) == 0
    })
    .await;
    let outputs: Vec<String> = stored_events(gw.store.as_ref(), &key)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            turnstile::state::EventKind::AgentOutput { text, status, .. } => {
                Some(format!("{text} {status:?}"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(
        outputs[0].contains("done: hold 1") && outputs[0].contains("Final"),
        "{outputs:?}"
    );
    assert!(outputs[1].contains("Interrupted"), "{outputs:?}");
}

#[tokio::test]
async fn a_failing_agent_is_502_without_its_detail() {
    // Property: an agent error is 502 `agent_failed`, and its message stays in the logs.
    let gw = TestGateway::new(FlakyAgent);
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "fail"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_GATEWAY, "agent_failed")
    );
    assert!(!body.to_string().contains("on purpose"), "{body}");
}

#[tokio::test]
async fn an_unavailable_store_is_503_and_a_broken_one_500_without_detail() {
    // Property: a store that is down answers 503 `store_unavailable`; corrupt data answers 500
    // `internal`; neither body carries the store's own message.
    let faulty = FaultyStore::new(Arc::new(InMemoryStore::new()));
    let gw = TestGateway::with_store(
        Runtime::builder().agent(EchoAgent),
        faulty.clone(),
        HttpConfig::default(),
    );
    faulty.fail_next_appends(1);
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
    );
    assert!(!body.to_string().contains("injected"), "{body}");

    let gw = TestGateway::with_store(
        Runtime::builder().agent(EchoAgent),
        Arc::new(CorruptStore),
        HttpConfig::default(),
    );
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "x"}),
        ))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::INTERNAL_SERVER_ERROR, "internal")
    );
    assert!(!body.to_string().contains("/srv/secret"), "{body}");
}

/// A store whose every session is corrupt, naming a secret path in its error.
struct CorruptStore;

#[async_trait]
impl Store for CorruptStore {
    fn name(&self) -> &'static str {
        "corrupt"
    }
    async fn load(&self, key: &SessionKey, _: usize) -> Result<LoadedSession, StoreError> {
        Err(StoreError::Corrupt {
            key: key.to_string(),
            detail: "bad bytes in /srv/secret/head.json".into(),
        })
    }
    async fn append(&self, _: &SessionKey, _: u64, _: &[Event]) -> Result<u64, StoreError> {
        Ok(1)
    }
    async fn read_events(
        &self,
        _: &SessionKey,
        _: Seq,
        _: usize,
    ) -> Result<Vec<Event>, StoreError> {
        Ok(Vec::new())
    }
    async fn delete(&self, _: &SessionKey) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn list(&self, _: &str, _: &PageRequest) -> Result<Page, StoreError> {
        Ok(Page::default())
    }
    async fn delete_user(&self, _: &str) -> Result<u64, StoreError> {
        Ok(0)
    }
    async fn gc(&self, _: &GcPolicy, _: u64) -> Result<GcReport, StoreError> {
        Ok(GcReport::default())
    }
}
