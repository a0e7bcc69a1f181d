//! Property: a bad flag or a meaningless combination of flags is refused before anything runs,
//! with a non-zero exit and a message that names what was expected.

mod support;

use support::cli::turnstile;

/// Runs the binary and checks it failed with `expected` somewhere in its error output.
fn refused(args: &[&str], expected: &str) {
    let run = turnstile(args);
    assert!(!run.success, "turnstile {args:?} should have failed");
    assert!(
        run.stderr.contains(expected),
        "turnstile {args:?}: expected {expected:?} in:\n{}",
        run.stderr
    );
    assert!(
        run.stdout.is_empty(),
        "nothing should be reported: {}",
        run.stdout
    );
}

#[test]
fn load_refuses_bad_values_and_combinations() {
    refused(&["load", "--sessions", "0"], "must be at least 1");
    refused(&["load", "--sessions", "many"], "invalid value 'many'");
    refused(
        &["load", "--latency", "fast"],
        "expected milliseconds like 20 or 10..50",
    );
    refused(&["load", "--latency", "50..10"], "the range is reversed");
    refused(&["load", "--agent", "gpt"], "expected mock or echo");
    refused(
        &["load", "--policy", "lifo"],
        "expected queue, latest, reject or merge",
    );
    refused(
        &["load", "--store", "mysql://db"],
        "expected memory, file, file:PATH",
    );
    refused(
        &["load", "--baseline", "actix"],
        "expected mutex-gate or ractor",
    );
    refused(
        &["load", "--baseline", "ractor,actix"],
        "expected mutex-gate or ractor",
    );
    refused(
        &["load", "--interrupt-rate", "1.5"],
        "expected a number from 0 to 1",
    );
    refused(
        &["load", "--store", "memory", "--interrupt-rate", "0.1"],
        "use the mock agent with a latency",
    );
    refused(
        &[
            "load",
            "--latency",
            "20",
            "--chunks",
            "1",
            "--interrupt-rate",
            "0.1",
        ],
        "needs --chunks 2 or more",
    );
    refused(&["load", "--burst", "0"], "must be at least 1");
    refused(
        &["load", "--sessions", "100000", "--turns", "1000"],
        "at most 50000000 turns",
    );
    refused(
        &["load", "--progress", "sometimes"],
        "expected auto, always or never",
    );
    refused(
        &["load", "--no-such-flag"],
        "unexpected argument '--no-such-flag'",
    );
}

#[test]
fn sessions_refuses_bad_values_and_says_what_is_needed() {
    let memory = ["sessions", "--store", "memory"];
    let with = |rest: &[&'static str]| [&memory[..], rest].concat();
    refused(&with(&["list"]), "listing is per user: pass --user USER");
    refused(&with(&["gc"]), "gc needs --max-sessions N, --max-age D");
    refused(
        &with(&["gc", "--max-age", "3w"]),
        "expected a number and a unit: 30d, 12h",
    );
    refused(&with(&["show", "no-slash"]), "invalid value 'no-slash'");
    refused(&with(&["show", "u/missing"]), "no session u/missing");
    refused(&with(&["export", "u/missing"]), "no session u/missing");
    refused(
        &with(&["list", "--user", "u", "--limit", "0"]),
        "page limit 0 is outside",
    );
}

#[cfg(feature = "http")]
#[test]
fn serve_refuses_meaningless_limits_and_an_empty_tokens_file() {
    fn with<'a>(rest: &[&'a str]) -> Vec<&'a str> {
        [
            &["serve", "--addr", "127.0.0.1:0", "--store", "memory"][..],
            rest,
        ]
        .concat()
    }
    refused(
        &with(&["--request-timeout", "0"]),
        "--request-timeout must be a positive number of seconds",
    );
    refused(
        &with(&["--drain-timeout=-1"]),
        "--drain-timeout must be a positive number of seconds",
    );
    refused(
        &with(&["--capacity-wait=-1"]),
        "--capacity-wait must be a number of seconds, 0 or more",
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "# nobody yet\n\n").unwrap();
    let tokens = tokens.to_str().unwrap();
    refused(&with(&["--tokens", tokens]), "lists no token");
    refused(
        &["serve", "--addr", "0.0.0.0:0", "--store", "memory"],
        "refusing to serve on a non-loopback address",
    );
}

/// `--worker-threads` is global: accepted before or after the command, refused out of range.
#[test]
fn worker_threads_must_be_a_thread_count_and_are_accepted_by_every_command() {
    refused(&["load", "--worker-threads", "0"], "0 is not in 1..=1024");
    refused(
        &["--worker-threads", "2000", "load"],
        "2000 is not in 1..=1024",
    );
    refused(&["load", "--worker-threads", "one"], "invalid value 'one'");
    for (args, threads) in [
        (["--worker-threads", "1", "load"], 1),
        (["load", "--worker-threads", "1"], 1),
        (["load", "--worker-threads", "3"], 3),
    ] {
        let mut args = args.to_vec();
        args.extend(["--sessions", "20", "--turns", "3", "--json"]);
        let (run, report) = support::cli::turnstile_json(&args);
        assert!(run.success, "turnstile {args:?}: {}", run.stderr);
        assert_eq!(report["worker_threads"], threads, "{report}");
        assert_eq!(report["turns_ok"], 60, "{report}");
        assert_eq!(report["lost"], 0, "{report}");
    }
}
