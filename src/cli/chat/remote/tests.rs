//! URLs, transcript lines and the terminal conversation of `chat --url`.

use super::*;

#[test]
fn session_urls_keep_the_base_path_and_encode_the_ids() {
    let key = SessionKey::new("a/b", "s?1 #x").unwrap();
    let remote = Remote::new("http://127.0.0.1:9/prefix/", None, key, Api::Turnstile).unwrap();
    assert_eq!(
        remote.url(&["turns"]).as_str(),
        "http://127.0.0.1:9/prefix/v1/sessions/a%2Fb/s%3F1%20%23x/turns"
    );
}

#[test]
fn only_http_urls_and_set_variables_are_taken() {
    let key = SessionKey::new("a", "b").unwrap();
    assert!(Remote::new("ftp://127.0.0.1/", None, key.clone(), Api::Turnstile).is_err());
    let missing = Remote::new(
        "http://127.0.0.1/",
        Some("TURNSTILE_SURELY_UNSET_VAR"),
        key,
        Api::Turnstile,
    );
    assert!(missing
        .err()
        .unwrap()
        .contains("TURNSTILE_SURELY_UNSET_VAR is not set"));
}

#[test]
fn history_lines_show_who_said_what() {
    let said = json!({"kind": {"type": "user_input", "text": "hi"}});
    assert_eq!(shown(&said).unwrap(), "you> hi");
    let cut = json!({"kind": {"type": "agent_output", "text": "par",
        "status": {"status": "interrupted", "reason": "requested"}}});
    assert_eq!(shown(&cut).unwrap(), "par [interrupted]");
    assert_eq!(shown(&json!({"kind": {"type": "tool_call"}})), None);
}
