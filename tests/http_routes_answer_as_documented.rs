//! Every route of the HTTP API answers with the status and body `docs/http-api.md` documents,
//! exercised through `Router::oneshot` (no socket).

#![cfg(feature = "http")]

mod support;

use axum::http::{Method, StatusCode};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use support::harness::*;
use support::http::*;
use turnstile::{MockLlmAgent, Runtime};

fn gateway() -> TestGateway {
    TestGateway::new(MockLlmAgent::new().with_chunks(3))
}

#[tokio::test]
async fn a_turn_answers_its_outcome_as_json() {
    // Property: POST …/turns returns the durable outcome as {"outcome", "output", "seq"}.
    let gw = gateway();
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s1/turns",
            ALICE,
            json!({"input": "hi"}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "completed");
    assert_eq!(body["output"], MockLlmAgent::reply_for("hi", 0));
    assert_eq!(body["seq"], 2, "input is event 1, the output event 2");
}

#[tokio::test]
async fn a_turn_asked_as_event_stream_sends_chunks_then_one_outcome() {
    // Property: with `Accept: text/event-stream` the answer is `chunk` events whose texts make
    // up the output, then exactly one `outcome` event, last.
    let gw = gateway();
    let mut request = post(
        "/v1/sessions/alice/s1/turns",
        ALICE,
        json!({"input": "hello"}),
    );
    request
        .headers_mut()
        .insert("accept", "text/event-stream".parse().unwrap());
    let (status, headers, text) = gw.send_raw(request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = parse_events(&text);
    let (last, chunks) = events.split_last().expect("some events");
    assert_eq!(chunks.len(), 3, "{text}");
    assert!(chunks.iter().all(|(name, _)| name == "chunk"));
    let streamed: String = chunks
        .iter()
        .map(|(_, data)| data["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(last.0, "outcome");
    assert_eq!(last.1["outcome"], "completed");
    assert_eq!(last.1["output"], streamed);
}

#[tokio::test]
async fn interrupting_an_idle_session_says_so_and_an_input_runs_next() {
    // Property: POST …/interrupt answers {"interrupted": false} when nothing runs (with no
    // body, or a JSON `null`); with a body it also runs the input and answers its outcome.
    let gw = gateway();
    let (status, body) = gw
        .send(request(
            Method::POST,
            "/v1/sessions/alice/s1/interrupt",
            Some(ALICE),
            None,
        ))
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"interrupted": false}))
    );
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s1/interrupt",
            ALICE,
            serde_json::Value::Null,
        ))
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"interrupted": false}))
    );
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/s1/interrupt",
            ALICE,
            json!({"input": "instead"}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["interrupted"], false);
    assert_eq!(body["outcome"]["outcome"], "completed");
}

#[tokio::test]
async fn a_session_reads_back_with_its_events_and_is_404_when_missing() {
    // Property: GET shows the events window, state and metadata; a session never stored is 404.
    let gw = gateway();
    let (status, body) = gw.send(get("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
    gw.send(post(
        "/v1/sessions/alice/s1/turns",
        ALICE,
        json!({"input": "hi"}),
    ))
    .await;
    let (status, body) = gw.send(get("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["user"].as_str(), body["session"].as_str()),
        (Some("alice"), Some("s1"))
    );
    assert_eq!(body["meta"]["events"], 2);
    assert_eq!(body["events"].as_array().map(Vec::len), Some(2));
    assert!(
        body.get("app_state").is_none(),
        "app state is for admins only"
    );
    let (_, admin_view) = gw.send(get("/v1/sessions/alice/s1", ADMIN)).await;
    assert!(admin_view.get("app_state").is_some());
}

#[tokio::test]
async fn clearing_keeps_the_session_and_missing_ones_are_404() {
    // Property: POST …/clear empties the context but keeps the session; clearing a session that
    // does not exist is 404 and creates nothing.
    let gw = gateway();
    let (status, _) = gw
        .send(request(
            Method::POST,
            "/v1/sessions/alice/none/clear",
            Some(ALICE),
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = gw.send(get("/v1/sessions/alice/none", ALICE)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "clearing created nothing");
    gw.send(post(
        "/v1/sessions/alice/s1/turns",
        ALICE,
        json!({"input": "hi"}),
    ))
    .await;
    let (status, body) = gw
        .send(request(
            Method::POST,
            "/v1/sessions/alice/s1/clear",
            Some(ALICE),
            None,
        ))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"cleared": true})));
    let (_, body) = gw.send(get("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!(
        body["meta"]["events"], 3,
        "the clear is an event of its own"
    );
}

#[tokio::test]
async fn deleting_a_session_removes_it() {
    // Property: DELETE answers whether the session existed; afterwards GET is 404.
    let gw = gateway();
    gw.send(post(
        "/v1/sessions/alice/s1/turns",
        ALICE,
        json!({"input": "hi"}),
    ))
    .await;
    let (status, body) = gw.send(delete("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"deleted": true})));
    let (status, _) = gw.send(get("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, body) = gw.send(delete("/v1/sessions/alice/s1", ALICE)).await;
    assert_eq!(body, json!({"deleted": false}));
}

#[tokio::test]
async fn a_users_sessions_list_in_pages_of_metadata() {
    // Property: GET /v1/users/{user}/sessions pages through metadata with limit and cursor.
    let gw = gateway();
    for s in ["a", "b", "c"] {
        let uri = format!("/v1/sessions/alice/{s}/turns");
        gw.send(post(&uri, ALICE, json!({"input": "hi"}))).await;
    }
    let (status, page) = gw
        .send(get("/v1/users/alice/sessions?limit=2", ALICE))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let ids: Vec<&str> = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alice/a", "alice/b"]);
    assert!(page["sessions"][0].get("events").is_some());
    let cursor = page["next_cursor"].as_str().expect("a next page");
    let uri = format!("/v1/users/alice/sessions?limit=2&cursor={cursor}");
    let (_, page) = gw.send(get(&uri, ALICE)).await;
    assert_eq!(page["sessions"].as_array().map(Vec::len), Some(1));
    assert!(page["next_cursor"].is_null());
}

#[tokio::test]
async fn deleting_a_user_removes_their_sessions_and_pairings_only() {
    // Property: DELETE /v1/users/{user} removes every session of that user and its pairings,
    // and nothing of another user.
    let gw = gateway();
    for (user, token) in [("alice", ALICE), ("bob", BOB)] {
        let uri = format!("/v1/sessions/{user}/s/turns");
        gw.send(post(&uri, token, json!({"input": "hi"}))).await;
    }
    gw.send(request(
        Method::PUT,
        "/v1/pairings/slack/U1",
        Some(ADMIN),
        Some(json!({"user": "alice"})),
    ))
    .await;
    let (status, body) = gw
        .send(request(
            Method::DELETE,
            "/v1/users/alice",
            Some(ALICE),
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"deleted_sessions": 1, "deleted_pairings": 1}));
    assert_eq!(
        gw.send(get("/v1/sessions/alice/s", ALICE)).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        gw.send(get("/v1/sessions/bob/s", BOB)).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_channel_message_answers_with_its_route() {
    // Property: POST /v1/channels/{channel}/messages answers the outcome plus the session it
    // went to and the sender's canonical user.
    let gw = gateway();
    let body = json!({"chat": "C1", "thread": "T1", "user": "U1", "input": "hi"});
    let (status, answer) = gw
        .send(post("/v1/channels/slack/messages", SLACK_BOT, body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcome"], "completed");
    assert_eq!(
        answer["session"],
        json!({"user": "channel:slack", "session": "slack|C1|T1"})
    );
    // Whom a channel account is paired to is shown to admins and to that user only: a bot
    // token could otherwise post as any account to look its pairing up.
    assert_eq!((answer.get("user"), answer.get("paired")), (None, None));
    let body = json!({"chat": "C1", "user": "U1", "input": "again"});
    let (status, answer) = gw
        .send(post("/v1/channels/slack/messages", ADMIN, body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        (answer["user"].as_str(), answer["paired"].as_bool()),
        (Some("U1@slack"), Some(false))
    );
    gw.gateway
        .channels()
        .pair("slack", "U1", "alice")
        .await
        .unwrap();
    let body = json!({"chat": "C1", "user": "U1", "input": "as alice"});
    let (_, answer) = gw
        .send(post("/v1/channels/slack/messages", SLACK_BOT, body))
        .await;
    assert_eq!((answer.get("user"), answer.get("paired")), (None, None));
}

#[tokio::test]
async fn pairings_are_put_read_and_deleted() {
    // Property: PUT pairs (answering the previous user), GET reads, DELETE unpairs; GET of an
    // unpaired account is 404 for an admin.
    let gw = gateway();
    let uri = "/v1/pairings/slack/U1";
    let put = |user: &str| request(Method::PUT, uri, Some(ADMIN), Some(json!({ "user": user })));
    let (status, body) = gw.send(put("alice")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["previous"], serde_json::Value::Null);
    let (_, body) = gw.send(put("carol")).await;
    assert_eq!(body["previous"], "alice");
    let (status, body) = gw.send(get(uri, ADMIN)).await;
    assert_eq!(
        (status, body["user"].as_str()),
        (StatusCode::OK, Some("carol"))
    );
    let (_, body) = gw.send(delete(uri, ADMIN)).await;
    assert_eq!(body, json!({"deleted": true}));
    let (status, body) = gw.send(get(uri, ADMIN)).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "not_found"));
}

#[tokio::test]
async fn probes_answer_without_a_token() {
    // Property: /healthz and /readyz need no token and answer 200 while serving.
    let gw = gateway();
    let (status, body) = gw.send(request(Method::GET, "/healthz", None, None)).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    let (status, body) = gw.send(request(Method::GET, "/readyz", None, None)).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));
}

#[tokio::test]
async fn a_turn_may_name_its_overlap_policy() {
    // Property: the body's "policy" governs that turn when it meets a busy session: `reject`
    // is a 409 `busy`, `latest` interrupts the running turn; an unknown policy is a 400.
    let agent = Arc::new(GateAgent::default());
    let gw = TestGateway::with(
        Runtime::builder().agent_arc(agent.clone()),
        Default::default(),
    );
    let running = tokio::spawn({
        let gw = gw.gateway.clone();
        async move {
            let router = gw.router();
            let response = tower::ServiceExt::oneshot(
                router,
                post(
                    "/v1/sessions/alice/p/turns",
                    ALICE,
                    json!({"input": "hold on"}),
                ),
            )
            .await
            .unwrap();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
        }
    });
    eventually("the first turn to run", || {
        agent.entered.load(Ordering::SeqCst) == 1
    })
    .await;

    let body = json!({"input": "now", "policy": "reject"});
    let (status, answer) = gw
        .send(post("/v1/sessions/alice/p/turns", ALICE, body))
        .await;
    assert_eq!((status, code(&answer)), (StatusCode::CONFLICT, "busy"));

    let body = json!({"input": "newer", "policy": "latest"});
    let (status, answer) = gw
        .send(post("/v1/sessions/alice/p/turns", ALICE, body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcome"], "completed");
    assert_eq!(answer["output"], "done: newer");
    let first = within(running).await.unwrap();
    assert_eq!(first["outcome"], "interrupted", "{first}");
    assert_eq!(first["reason"], "superseded", "{first}");

    let body = json!({"input": "hi", "policy": "loudest"});
    let (status, answer) = gw
        .send(post("/v1/sessions/alice/p/turns", ALICE, body))
        .await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::BAD_REQUEST, "bad_body")
    );
}

#[tokio::test]
async fn a_fork_copies_the_log_up_to_at_seq_and_refuses_what_makes_no_sense() {
    // Property: POST …/fork creates the named session of the same user from the source's log
    // up to `at_seq`; an existing target is 409, a missing source 404, a bad `at_seq` 400, and
    // another user's source 403.
    let gw = gateway();
    for input in ["one", "two", "three"] {
        let (status, _) = gw
            .send(post(
                "/v1/sessions/alice/src/turns",
                ALICE,
                json!({"input": input}),
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, body) = gw
        .send(post(
            "/v1/sessions/alice/src/fork",
            ALICE,
            json!({"to": "copy", "at_seq": 4}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"user": "alice", "session": "copy", "events": 4})
    );
    let (status, copy) = gw.send(get("/v1/sessions/alice/copy", ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    let texts: Vec<_> = copy["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(texts, [1, 2, 3, 4], "{copy}");

    let cases = [
        (
            "/v1/sessions/alice/src/fork",
            ALICE,
            json!({"to": "copy"}),
            StatusCode::CONFLICT,
            "already_exists",
        ),
        (
            "/v1/sessions/alice/none/fork",
            ALICE,
            json!({"to": "x"}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/v1/sessions/alice/src/fork",
            ALICE,
            json!({"to": "y", "at_seq": 99}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/v1/sessions/alice/src/fork",
            ALICE,
            json!({"to": ""}),
            StatusCode::BAD_REQUEST,
            "invalid_key",
        ),
        (
            "/v1/sessions/alice/src/fork",
            BOB,
            json!({"to": "z"}),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
    ];
    for (uri, token, body, want, want_code) in cases {
        let (status, answer) = gw.send(post(uri, token, body.clone())).await;
        assert_eq!(
            (status, code(&answer)),
            (want, want_code),
            "{uri} {body}: {answer}"
        );
    }
}
