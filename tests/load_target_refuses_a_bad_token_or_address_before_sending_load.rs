//! `turnstile load --target` checks its targets before any turn is sent: a wrong token, a user
//! token (which cannot reach the run's sessions), a refused connection or a URL that is not
//! plain `http://` is a clear error on stderr and a non-zero exit within seconds, and the server
//! saw no turn. `--target` with `--store` or `--cluster` is refused by the argument parser.

mod support;

use std::time::{Duration, Instant};

use support::cli::turnstile;
use support::http::{ADMIN, ALICE};
use support::serve::{Serve, ServeStore};

/// Well under a run's length, well over a probe's.
const FAST: Duration = Duration::from_secs(10);

fn refused(args: &[&str], expected: &[&str]) {
    let started = Instant::now();
    let run = turnstile(args);
    assert!(!run.success, "{args:?} succeeded: {}", run.stdout);
    assert!(
        started.elapsed() < FAST,
        "{args:?} took {:?}",
        started.elapsed()
    );
    for text in expected {
        assert!(run.stderr.contains(text), "{args:?}: {}", run.stderr);
    }
    assert!(
        run.stdout.is_empty(),
        "{args:?} printed a report: {}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_and_addresses_fail_fast_with_a_clear_message() {
    let serve = Serve::start(ServeStore::Memory, 0, 1, &[]);
    let base = serve.base.clone();
    let load = |token: &'static str| {
        vec![
            "load",
            "--target",
            &base,
            "--token",
            token,
            "--sessions",
            "10",
            "--turns",
            "2",
        ]
    };
    tokio::task::block_in_place(|| {
        refused(&load("not-a-token-0000000000"), &["401", "--token"]);
        refused(&load(ALICE), &["403", "admin token"]);
        let mut none = load(ADMIN);
        none.truncate(3);
        refused(&none, &["401"]);
    });
    assert_eq!(
        serve.turns_answered().await,
        0,
        "no turn reached the server"
    );
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("address"))
    };
    tokio::task::block_in_place(|| {
        refused(
            &["load", "--target", &closed, "--token", ADMIN],
            &["cannot reach", &closed],
        );
        refused(
            &["load", "--target", "https://127.0.0.1:1"],
            &["only http://"],
        );
        refused(
            &["load", "--target", "http://admin:pw@127.0.0.1:1"],
            &["credentials"],
        );
        for other in [["--store", "memory"], ["--cluster", "2"]] {
            let mut args = vec!["load", "--target", &base];
            args.extend(other);
            refused(&args, &["cannot be used with"]);
        }
    });
}
