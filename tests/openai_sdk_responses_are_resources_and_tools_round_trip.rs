//! Property: with the official `openai` Python package against `turnstile serve --agent openai`,
//! a response is a resource from its creation — retrieved while it runs, cancelled after its
//! streaming client closed the connection (the partial output kept), run with `background` and
//! polled to its end — a function tool the client declares round-trips through a
//! `function_call` item and a `function_call_output` (an output for no call is refused, naming
//! `input`), and 200 stateless chat completions each carry their usage.

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use std::time::Duration;

use support::fake_openai::{FakeOpenAi, Reply};
use support::http::ALICE;
use support::openai_sdk::run_script;
use support::serve::{ModelServe, Serve};

#[tokio::test]
async fn responses_are_resources_and_client_tools_round_trip() {
    let upstream = FakeOpenAi::start(vec![
        // Streams for two seconds: the client leaves after the first word, then cancels.
        Reply::Text {
            deltas: vec!["word ".to_owned(); 20],
            delay: Duration::from_millis(100),
            usage: Some((5, 20)),
        },
        Reply::ToolCalls(vec![("m1".into(), "add".into(), r#"{"a":2,"b":3}"#.into())]),
        Reply::text(&["5, it is"]),
        Reply::Text {
            deltas: vec!["done in the background".to_owned()],
            delay: Duration::from_millis(300),
            usage: Some((5, 1)),
        },
    ])
    .await;
    let serve = Serve::model(ModelServe {
        base_url: &upstream.base_url,
        key: "sk-test",
        log: "error",
        extra: &[],
    });
    let ids = {
        let base = serve.base.clone();
        tokio::task::spawn_blocking(move || run_script("sdk_resources.py", &[&base, ALICE]))
            .await
            .expect("the script's thread")
    };
    let requests = upstream.requests();
    assert_eq!(
        requests.len(),
        4 + 200,
        "the refused output ran nothing; each completion one request"
    );
    let offered = &requests[1]["tools"][0]["function"]["name"];
    assert_eq!(offered, "add", "the client's tool reached the model");
    let after_tool = requests[2]["messages"].as_array().expect("messages");
    assert_eq!(after_tool.last().unwrap()["role"], "tool");
    assert_eq!(after_tool.last().unwrap()["content"], "5");
    assert!(ids["background"].as_str().is_some());
}
