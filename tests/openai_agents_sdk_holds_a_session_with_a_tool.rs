//! Property: the OpenAI Agents SDK — the version `scripts/test.sh` installs — runs an agent through
//! `turnstile serve --agent openai` over three turns of a `SQLiteSession`, with a function tool
//! the SDK runs itself: its instructions reach the model, the history it resends (assistant
//! messages, the tool's call and output among it) is the model's context, the tool's call comes
//! back to the SDK (which runs it once) and its output continues the turn.

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use serde_json::Value;
use support::fake_openai::{FakeOpenAi, Reply};
use support::http::ALICE;
use support::openai_sdk::{run_script_with, AGENTS_PACKAGE};
use support::serve::{ModelServe, Serve};

fn roles(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let calls = m["tool_calls"].as_array().map_or(0, Vec::len);
            let role = m["role"].as_str().unwrap_or_default();
            format!("{role}{}", if calls > 0 { "+calls" } else { "" })
        })
        .collect()
}

#[tokio::test]
async fn the_agents_sdk_holds_three_turns_with_a_function_tool() {
    let upstream = FakeOpenAi::start(vec![
        Reply::text(&["hello Ada"]),
        Reply::ToolCalls(vec![("m1".into(), "add".into(), r#"{"a":2,"b":3}"#.into())]),
        Reply::text(&["2+3 is 5"]),
        Reply::text(&["you are welcome"]),
    ])
    .await;
    let serve = Serve::model(ModelServe {
        base_url: &upstream.base_url,
        key: "sk-test",
        log: "error",
        extra: &[],
    });
    let printed = {
        let base = serve.base.clone();
        tokio::task::spawn_blocking(move || {
            run_script_with("agents", AGENTS_PACKAGE, "agents_turns.py", &[&base, ALICE])
        })
        .await
        .expect("the script's thread")
    };
    assert_eq!(printed["ran"], 1);

    let requests = upstream.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert_eq!(requests[0]["messages"][0]["role"], "system");
    assert_eq!(requests[0]["messages"][0]["content"], "be brief");
    assert_eq!(
        roles(&requests[2]),
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant+calls",
            "tool"
        ],
        "{:#}",
        requests[2]
    );
    let tool = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(tool["content"], "5");
    assert_eq!(
        roles(&requests[3]),
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant+calls",
            "tool",
            "assistant",
            "user"
        ],
        "the third turn's context is the whole session: {:#}",
        requests[3]
    );
}
