//! Property: `serve --cluster` starts only where other processes can share its sessions — on a
//! store that every process reaches and that keeps session leases, at an address the others can
//! reach — and otherwise exits before serving, with a message that says what to give instead.

mod support;

use support::cli::turnstile;

fn refused(args: &[&str], expected: &str) {
    let run = turnstile(args);
    assert!(!run.success, "turnstile {args:?} should have failed");
    assert!(
        run.stderr.contains(expected),
        "turnstile {args:?}: expected {expected:?} in:\n{}",
        run.stderr
    );
    assert!(
        !run.stdout.contains("listening"),
        "it never served: {}",
        run.stdout
    );
}

#[test]
fn a_store_private_to_one_process_or_without_leases_is_refused() {
    let local = ["serve", "--cluster", "--addr", "127.0.0.1:0"];
    refused(
        &[&local[..], &["--store", "memory"]].concat(),
        "the memory store lives in this process's memory. Stores that do: redis://HOST:PORT, redis+cluster://",
    );
    refused(
        &[&local[..], &["--store", "file:tmp"]].concat(),
        "store keeps no session leases. Stores that do: redis://HOST:PORT, redis+cluster://",
    );
}

#[test]
fn an_unspecified_listen_address_needs_an_advertised_one() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "admin-token-000000000000 admin\n").expect("write tokens");
    let tokens = tokens.to_str().expect("a UTF-8 path");
    refused(
        &[
            "serve",
            "--cluster",
            "--store",
            "memory",
            "--addr",
            "0.0.0.0:0",
            "--tokens",
            tokens,
        ],
        "--cluster needs --advertise http://HOST:PORT when listening on 0.0.0.0:0",
    );
}

#[test]
fn cluster_flags_are_checked() {
    refused(
        &["serve", "--advertise", "http://127.0.0.1:1"],
        "the following required arguments were not provided",
    );
    refused(
        &["serve", "--cluster", "--advertise", "https://node:8080"],
        "does not start with http://",
    );
    refused(
        &["serve", "--cluster", "--advertise", "http://node:8080/api"],
        "has a path or query",
    );
    refused(
        &["serve", "--cluster", "--lease-ttl", "0"],
        "--lease-ttl must be a positive number of seconds",
    );
}
