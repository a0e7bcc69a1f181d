//! A registry file that cannot be used is refused with an error naming the file and what is
//! wrong where: the line and the unknown or missing field (TOML), line and column (JSON), the
//! key whose default has the wrong type. `serve --state-keys` exits with that error before
//! listening, and `sessions show --state-keys` labels declared, undeclared and mistyped keys.

mod support;

use std::path::Path;

use turnstile::state_keys::{Mode, StateKeys};

use support::cli::turnstile;

#[test]
fn toml_and_json_errors_name_the_line_and_the_field() {
    let path = Path::new("keys.toml");
    let typo = "mode = \"strict\"\n\n[keys.topic]\ntype = \"string\"\ndefualt = \"x\"\n";
    let err = StateKeys::from_toml(typo, path).unwrap_err().to_string();
    assert!(err.contains("keys.toml") && err.contains("line 5"), "{err}");
    assert!(err.contains("defualt"), "{err}");

    let missing = "[keys.topic]\ndescription = \"no type\"\n";
    let err = StateKeys::from_toml(missing, path).unwrap_err().to_string();
    assert!(err.contains("type"), "{err}");

    let bad_type = "[keys.topic]\ntype = \"text\"\n";
    let err = StateKeys::from_toml(bad_type, path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("text") && err.contains("line 2"), "{err}");

    let wrong_default = r#"{"keys": {"count": {"type": "integer", "default": "ten"}}}"#;
    let err = StateKeys::from_json(wrong_default, Path::new("k.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"count\"") && err.contains("integer"),
        "{err}"
    );

    let broken = "{\"keys\": {\n  \"a\": {\"type\": \"string\",}\n}}";
    let err = StateKeys::from_json(broken, Path::new("k.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2"), "{err}");

    let good = r#"{"mode": "warn", "keys": {"user:name": {"type": "string", "default": "x"}}}"#;
    assert_eq!(
        StateKeys::from_json(good, Path::new("k.json"))
            .unwrap()
            .mode(),
        Mode::Warn
    );
}

#[test]
fn serve_refuses_a_bad_registry_before_listening() {
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("keys.toml");
    std::fs::write(&file, "[keys.topic]\ntype = \"string\"\nwhat = 1\n").unwrap();
    let run = turnstile(&[
        "serve",
        "--store",
        "memory",
        "--addr",
        "127.0.0.1:0",
        "--state-keys",
        file.to_str().unwrap(),
    ]);
    assert!(!run.success, "serve must not start");
    assert!(
        run.stderr.contains("line 3") && run.stderr.contains("what"),
        "{}",
        run.stderr
    );
}

#[test]
fn sessions_show_labels_declared_keys() {
    let folder = tempfile::tempdir().unwrap();
    let keys = folder.path().join("keys.toml");
    std::fs::write(
        &keys,
        "[keys.topic]\ntype = \"string\"\ndescription = \"what we talk about\"\n\
         [keys.\"user:name\"]\ntype = \"string\"\ndefault = \"friend\"\ndescription = \"how to address\"\n\
         [keys.count]\ntype = \"integer\"\n",
    )
    .unwrap();
    let doc = serde_json::json!({
        "schema_version": 1,
        "key": "ada/s1",
        "record": {"schema_version": 1, "key": "ada/s1", "version": 1, "next_seq": 2,
                   "created_ms": 1, "updated_ms": 1,
                   "state": {"topic": "rust", "count": "many", "stray": 1},
                   "stats": {"events": 1}},
        "events": [{"seq": 1, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "author": "agent",
                    "at_ms": 1, "kind": {"type": "note", "text": "imported"},
                    "state_delta": {"topic": "rust", "count": "many", "stray": 1}}]
    });
    let import = folder.path().join("s1.json");
    std::fs::write(&import, doc.to_string()).unwrap();
    let store = format!("file:{}", folder.path().join("store").display());
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "import",
        import.to_str().unwrap(),
    ]);
    assert!(run.success, "{}", run.stderr);
    let run = turnstile(&[
        "sessions",
        "--store",
        &store,
        "show",
        "ada/s1",
        "--state-keys",
        keys.to_str().unwrap(),
    ]);
    assert!(run.success, "{}", run.stderr);
    let line = |key: &str| {
        run.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no line for {key}: {}", run.stdout))
            .to_owned()
    };
    assert!(
        line("topic").contains("what we talk about"),
        "{}",
        run.stdout
    );
    assert!(line("count").contains("WRONG TYPE"), "{}", run.stdout);
    assert!(line("stray").contains("UNDECLARED"), "{}", run.stdout);
    assert!(line("user:name").contains("default"), "{}", run.stdout);
}
