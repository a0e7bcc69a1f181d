//! Property: any text read as the tokens file of `turnstile serve` gives tokens or an error
//! naming one of its lines, never a panic; a control character is never accepted; every
//! accepted line's token grants what the line says. The property-test half of the
//! `tokens_file` fuzz target (see `docs/fuzzing.md`).
#![cfg(feature = "http")]

use proptest::prelude::*;
use turnstile::fuzzing::check_tokens_file;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

/// One line: a good one, or a good one with a piece of noise (controls, `#`, odd spaces).
fn line() -> impl Strategy<Value = String> {
    let token = "[A-Za-z0-9#_-]{12,24}";
    let grant = prop_oneof![
        Just("admin".to_owned()),
        "user:[a-z:]{0,8}".prop_map(|u| u),
        ("user:[a-z]{1,8}", "[a-z.,]{0,10}").prop_map(|(u, c)| format!("{u} channels:{c}")),
        Just(String::new()),
    ];
    let noise = prop_oneof![
        Just(""),
        Just("\t"),
        Just(" # comment"),
        Just("#"),
        Just("\r"),
        Just("\u{0}"),
        Just("\u{1b}[0m"),
        Just("\u{85}"),
        Just("\u{a0}"),
        Just("\u{2028}"),
    ];
    (token, grant, noise, 0..3usize).prop_map(|(token, grant, noise, at)| match at {
        0 => format!("{noise}{token} {grant}"),
        1 => format!("{token}{noise} {grant}"),
        _ => format!("{token} {grant}{noise}"),
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn structured_files_parse_or_name_a_line(lines in prop::collection::vec(line(), 0..6)) {
        check_tokens_file(&lines.join("\n"));
        check_tokens_file(&lines.join("\r\n"));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,200}") {
        check_tokens_file(&text);
    }
}
