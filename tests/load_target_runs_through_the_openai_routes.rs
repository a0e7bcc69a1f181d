//! `turnstile load --target URL --api openai` sends the workload through OpenAI's routes: one
//! conversation per session, each turn a streamed response in it, some cancelled mid-way
//! through the session's interrupt. The verification reads every conversation back as its
//! session and finds nothing lost, duplicated, reordered or misanswered; the sessions on the
//! server are the conversations the run made.

mod support;

use support::cli::{turnstile, turnstile_json};
use support::http::ADMIN;
use support::serve::{Serve, ServeStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_load_runs_as_streamed_responses_in_conversations() {
    let serve = Serve::start(ServeStore::Memory, 40, 4, &[]);
    let args = [
        "load",
        "--target",
        &serve.base,
        "--token",
        ADMIN,
        "--api",
        "openai",
        "--stream",
        "--sessions",
        "20",
        "--turns",
        "5",
        "--concurrency",
        "20",
        "--latency",
        "40",
        "--chunks",
        "4",
        "--interrupt-rate",
        "0.2",
        "--json",
    ];
    let (run, report) = turnstile_json(&args);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(report["turns_ok"], 100, "{report}");
    for broken in ["lost", "duplicated", "reordered", "misanswered"] {
        assert_eq!(report[broken], 0, "{broken}: {report}");
    }
    assert!(
        report["turns_interrupted"].as_u64() > Some(0),
        "some responses were cut short: {report}"
    );
    assert!(
        report["ttfc_us"]["p50"].as_u64() < report["latency_us"]["p50"].as_u64(),
        "the first delta comes before the end: {report}"
    );

    // user0 holds session 0 of the run: a conversation, with its 5 turns.
    let listed: serde_json::Value = reqwest::Client::new()
        .get(serve.url("/v1/users/user0/sessions"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("a page");
    let sessions = listed["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{listed}");
    let id = sessions[0]["key"].as_str().unwrap_or_default();
    assert!(id.contains("conv_"), "a conversation: {listed}");
    assert!(
        sessions[0]["events"].as_u64() >= Some(10),
        "five inputs and five answers: {listed}"
    );
}

#[test]
fn only_the_queue_policy_is_taken() {
    let run = turnstile(&[
        "load",
        "--target",
        "http://127.0.0.1:9",
        "--api",
        "openai",
        "--policy",
        "latest",
    ]);
    assert!(!run.success);
    assert!(
        run.stderr
            .contains("--api openai takes --policy queue only"),
        "{}",
        run.stderr
    );
}
