//! A declared key's default is what an unset key reads as: through `TurnContext::get` in a turn
//! and in `Runtime::state` (session, user and app scopes alike). Once written, the written
//! value wins; a key declared without a default stays absent.

mod support;

use serde_json::json;
use turnstile::state_keys::{KeyType, Mode, StateKey, StateKeys};
use turnstile::{InMemoryStore, Runtime};

use support::artifacts::StateAgent;
use support::harness::key;

#[tokio::test]
async fn unset_declared_keys_read_as_their_defaults() {
    let keys = StateKeys::new(Mode::Strict)
        .declare(StateKey::new("topic", KeyType::String).with_default("none"))
        .unwrap()
        .declare(StateKey::new("user:name", KeyType::String).with_default("friend"))
        .unwrap()
        .declare(StateKey::new("app:plan", KeyType::Object).with_default(json!({"tier": 1})))
        .unwrap()
        .declare(StateKey::new("mood", KeyType::String))
        .unwrap();
    let rt = Runtime::builder()
        .agent(StateAgent)
        .store(InMemoryStore::new())
        .state_keys(keys)
        .build()
        .expect("runtime");
    let k = key("ada", "s1");
    let read = rt
        .call(&k, "?topic,user:name,app:plan,mood")
        .await
        .expect("turn");
    assert_eq!(read.output, r#"["none","friend",{"tier":1},null]"#);

    let view = rt
        .state(&k)
        .await
        .unwrap()
        .expect("the read turn stored the session");
    assert_eq!(view.record.state["topic"], "none");
    assert_eq!(view.user_state["name"], "friend");
    assert_eq!(view.app_state["plan"], json!({"tier": 1}));
    assert!(
        !view.record.state.contains_key("mood"),
        "no default, no value"
    );

    rt.call(&k, r#"{"user:name": "Ada"}"#).await.expect("turn");
    let read = rt.call(&k, "?user:name").await.expect("turn");
    assert_eq!(read.output, r#"["Ada"]"#);
    assert_eq!(
        rt.state(&k).await.unwrap().unwrap().user_state["name"],
        "Ada"
    );
}
