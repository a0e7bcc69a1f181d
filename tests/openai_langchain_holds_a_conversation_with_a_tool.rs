//! Property: LangChain's `ChatOpenAI(use_responses_api=True)` — the version `scripts/test.sh` installs —
//! holds a conversation through `turnstile serve --agent openai` as it does through OpenAI: it
//! sends the whole history with each turn (its earlier assistant messages were refused before),
//! a tool bound with `bind_tools` comes back as a call that the client runs and answers, and
//! `with_structured_output` reaches the model as a JSON schema. The model server sees each
//! turn's history in order, the client's tool among its own, and the schema.

#![cfg(all(feature = "http", feature = "openai"))]

mod support;

use serde_json::Value;
use support::fake_openai::{FakeOpenAi, Reply};
use support::http::ALICE;
use support::openai_sdk::{run_script_with, LANGCHAIN_PACKAGE};
use support::serve::{ModelServe, Serve};

fn roles_and_texts(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default().to_owned();
            let calls = m["tool_calls"].as_array().map_or(0, Vec::len);
            let role = m["role"].as_str().unwrap_or_default();
            (
                format!("{role}{}", if calls > 0 { "+calls" } else { "" }),
                text,
            )
        })
        .collect()
}

#[tokio::test]
async fn langchain_holds_three_turns_with_a_tool_and_structured_output() {
    let upstream = FakeOpenAi::start(vec![
        Reply::text(&["hello ", "Ada"]),
        Reply::text(&["you are Ada"]),
        Reply::ToolCalls(vec![("m1".into(), "add".into(), r#"{"a":2,"b":3}"#.into())]),
        Reply::text(&["2+3 is 5"]),
        Reply::text(&[r#"{"name": "Ada"}"#]),
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
            run_script_with(
                "langchain_openai",
                LANGCHAIN_PACKAGE,
                "langchain_turns.py",
                &[&base, ALICE],
            )
        })
        .await
        .expect("the script's thread")
    };
    assert_eq!(printed["answers"][2], "2+3 is 5");

    let requests = upstream.requests();
    assert_eq!(
        requests.len(),
        5,
        "one model request a turn, two for the tool's"
    );
    let said = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(r, t)| ((*r).to_owned(), (*t).to_owned()))
            .collect()
    };
    assert_eq!(
        roles_and_texts(&requests[1]),
        said(&[
            ("user", "hi, I am Ada"),
            ("assistant", "hello Ada"),
            ("user", "what is my name?")
        ]),
        "the history the client sent is the model's context"
    );
    let offered: Vec<&str> = requests[2]["tools"]
        .as_array()
        .expect("the client's tool is offered")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(offered, ["add"]);
    let last = roles_and_texts(&requests[3]);
    assert_eq!(
        last[last.len() - 2..].to_vec(),
        said(&[("assistant+calls", ""), ("tool", "5")]),
        "the client's result follows the call: {last:?}"
    );
    let format = &requests[4]["response_format"];
    assert_eq!(format["type"], "json_schema", "{:#}", requests[4]);
    assert_eq!(format["json_schema"]["name"], "Person");
}
