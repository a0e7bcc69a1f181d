//! Property: every way a model upstream fails a turn reaches the HTTP client as its own status
//! and code (not one `502 agent_failed`), a rate limit with the upstream's `Retry-After`; the
//! session's history holds the turn as failed, with its input and the same code; no response
//! carries the upstream's words; and the session stays usable (its next turn is answered).
//! Also: a client told `504 timeout` ("its outcome will be in the session's history") finds the
//! failed turn there once the model gave up.

#![cfg(all(feature = "openai", feature = "http"))]

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use support::fake_openai::{content, data, FakeOpenAi, Reply};
use support::harness::*;
use support::http::{code, get, post, TestGateway, ADMIN, ALICE};
use turnstile::http::HttpConfig;
use turnstile::{InMemoryStore, OpenAiAgent, Runtime, Store};

const KEY: &str = "sk-upstream-secret-0123456789";

/// One way an upstream fails, and what the client and the history must show for it.
struct Case {
    name: &'static str,
    script: Vec<Reply>,
    /// The agent checks the key (a 401 that echoes the key it was given).
    check_key: bool,
    status: u16,
    code: &'static str,
    retry_after: Option<&'static str>,
}

fn refusal(status: u16, retry_after: Option<u64>, message: &str) -> Reply {
    Reply::Status {
        status,
        retry_after,
        message: message.into(),
    }
}

fn cases() -> Vec<Case> {
    let case = |name, script, status, code| Case {
        name,
        script,
        check_key: false,
        status,
        code,
        retry_after: None,
    };
    vec![
        Case {
            check_key: true,
            ..case("a refused key", vec![], 502, "model_refused")
        },
        case(
            "an unknown model",
            vec![refusal(404, None, "no model m")],
            502,
            "model_refused",
        ),
        case(
            "a bad request",
            vec![refusal(400, None, "bad request")],
            502,
            "model_refused",
        ),
        case(
            "a server error past the retries",
            (0..4).map(|_| refusal(500, None, "boom")).collect(),
            502,
            "model_unavailable",
        ),
        Case {
            retry_after: Some("30"),
            ..case(
                "a rate limit asking for longer than the agent waits",
                vec![refusal(429, Some(30), "slow down")],
                503,
                "model_rate_limited",
            )
        },
        case(
            "an error object in the stream",
            vec![Reply::Raw(vec![
                content("half an "),
                data(&json!({"error": {"message": "overloaded", "type": "server_error"}})),
            ])],
            502,
            "model_unavailable",
        ),
        case(
            "a rate limit reported in the stream",
            vec![Reply::Raw(vec![data(
                &json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
            )])],
            503,
            "model_rate_limited",
        ),
        case(
            "a chunk that is not JSON",
            vec![Reply::Malformed],
            502,
            "model_malformed",
        ),
        case(
            "a stream that stalls",
            vec![Reply::Stall {
                deltas: vec!["so ".into()],
            }],
            504,
            "model_timeout",
        ),
        case(
            "no response headers",
            (0..4).map(|_| Reply::NoHeaders).collect(),
            504,
            "model_timeout",
        ),
    ]
}

/// The agent's attempt timeout for cases whose server stalls: short, so that four attempts fit
/// a test.
const STALL_TIMEOUT: Duration = Duration::from_millis(300);

/// The agent's attempt timeout for every other case: long enough that a loaded machine never
/// turns a late answer into a retry (which would take the next scripted reply).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the case's server stalls (its attempts must time out).
fn stalls(name: &str) -> bool {
    name.contains("stall") || name.contains("no response headers")
}

fn gateway(
    fake: &FakeOpenAi,
    store: Arc<dyn Store>,
    request_timeout: Duration,
    attempt_timeout: Duration,
) -> TestGateway {
    let agent = OpenAiAgent::builder(&fake.base_url, "m")
        .with_api_key(KEY)
        .with_timeout(attempt_timeout)
        .with_retries(3, Duration::from_millis(1), Duration::from_secs(5))
        .build()
        .unwrap();
    let config = HttpConfig {
        request_timeout,
        ..HttpConfig::default()
    };
    TestGateway::with_store(Runtime::builder().agent(agent), store, config)
}

/// The stored events of `alice/s` as JSON (`kind.type`, `kind.code`…), read from the store.
async fn history(store: &dyn Store) -> Vec<Value> {
    stored_events(store, &key("alice", "s"))
        .await
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

#[tokio::test]
async fn each_upstream_failure_has_its_own_code_and_is_recorded_as_failed() {
    for case in cases() {
        let fake = FakeOpenAi::start_with(case.script, case.check_key).await;
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let attempt = if stalls(case.name) {
            STALL_TIMEOUT
        } else {
            ANSWER_TIMEOUT
        };
        let gw = gateway(&fake, store.clone(), Duration::from_secs(20), attempt);
        let (status, headers, body) = within(gw.send_raw(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "question"}),
        )))
        .await;
        let name = case.name;
        let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(
            (status.as_u16(), code(&parsed)),
            (case.status, case.code),
            "{name}: {body}"
        );
        assert_eq!(
            headers.get("retry-after").and_then(|v| v.to_str().ok()),
            case.retry_after.or((case.status == 503).then_some("1")),
            "{name}: Retry-After"
        );
        for upstream_words in [KEY, "boom", "overloaded", "no model m", "Rate limit"] {
            assert!(!body.contains(upstream_words), "{name}: {body}");
        }
        let events = history(store.as_ref()).await;
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e["kind"]["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["user_input", "turn_failed"], "{name}: {events:?}");
        assert_eq!(events[0]["kind"]["text"], "question", "{name}");
        assert_eq!(events[1]["kind"]["code"], case.code, "{name}");
        // The session stays usable: its next turn runs (and, against a server that refuses
        // the key, fails the same way again).
        let (next, answer) = within(gw.send(post(
            "/v1/sessions/alice/s/turns",
            ALICE,
            json!({"input": "again"}),
        )))
        .await;
        if case.check_key {
            assert_eq!(code(&answer), case.code, "{name}: {answer}");
        } else {
            assert_eq!(next, 200, "{name}: the session stays usable: {answer}");
            assert_eq!(answer["output"], "ok", "{name}");
        }
    }
}

#[tokio::test]
async fn a_turn_answered_504_ends_up_in_the_history_as_failed() {
    // The model never answers; the client's wait (200 ms) ends before the agent gives up (its
    // 300 ms timeout, four attempts).
    let fake = FakeOpenAi::start((0..4).map(|_| Reply::NoHeaders).collect()).await;
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let gw = gateway(
        &fake,
        store.clone(),
        Duration::from_millis(200),
        STALL_TIMEOUT,
    );
    let (status, body) = within(gw.send(post(
        "/v1/sessions/alice/s/turns",
        ALICE,
        json!({"input": "are you there?"}),
    )))
    .await;
    assert_eq!((status.as_u16(), code(&body)), (504, "timeout"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("will be in the session's history"),
        "{body}"
    );
    let events = eventually_stored(store.as_ref(), &key("alice", "s"), 2).await;
    let failed = serde_json::to_value(&events[1]).unwrap();
    assert_eq!(failed["kind"]["type"], "turn_failed", "{failed}");
    assert_eq!(failed["kind"]["code"], "model_timeout", "{failed}");
    assert_eq!(
        failed["kind"]["reason"], "the model server did not answer in time",
        "the reason is kept: {failed}"
    );
    // Pages and clients read it back over HTTP.
    let (status, page) = within(gw.send(get("/v1/sessions/alice/s/events", ADMIN))).await;
    assert_eq!(status, 200);
    assert_eq!(page["events"][1]["kind"]["type"], "turn_failed", "{page}");
}
