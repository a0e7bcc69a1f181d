//! In `warn` mode an undeclared or mistyped write is stored as before, and counted: the
//! registry's `violations()` and the `turnstile_state_key_violations_total` metric. In `off`
//! mode nothing is counted.

mod support;

use turnstile::state_keys::{KeyType, Mode, StateKey, StateKeys};
use turnstile::{InMemoryStore, Runtime};

use support::artifacts::StateAgent;
use support::harness::key;

fn runtime(mode: Mode) -> Runtime {
    let keys = StateKeys::new(mode)
        .declare(StateKey::new("topic", KeyType::String))
        .unwrap();
    Runtime::builder()
        .agent(StateAgent)
        .store(InMemoryStore::new())
        .state_keys(keys)
        .build()
        .expect("runtime")
}

#[tokio::test]
async fn warn_stores_and_counts_each_bad_write() {
    let rt = runtime(Mode::Warn);
    let k = key("ada", "s1");
    rt.call(&k, r#"{"topic": 5, "extra": true}"#)
        .await
        .expect("the turn stands");
    rt.call(&k, r#"{"topic": "fine"}"#).await.expect("turn");
    assert_eq!(
        rt.state_keys().unwrap().violations(),
        2,
        "one mistyped, one undeclared"
    );
    let view = rt.state(&k).await.unwrap().expect("stored");
    assert_eq!(
        view.record.state["extra"], true,
        "the undeclared write was kept"
    );

    let off = runtime(Mode::Off);
    off.call(&k, r#"{"anything": 1}"#).await.expect("turn");
    assert_eq!(off.state_keys().unwrap().violations(), 0);
}
