//! `turnstile load --target URL --stream` sends every turn as server-sent events and times the
//! first `chunk` event: for a mock agent of 40 ms in 4 chunks, the time to first chunk is a
//! fraction of the whole turn's latency, as in process.

mod support;

use support::cli::turnstile_json;
use support::http::ADMIN;
use support::serve::{Serve, ServeStore};

#[test]
fn the_first_chunk_arrives_well_before_the_whole_reply() {
    let serve = Serve::start(ServeStore::Memory, 40, 4, &[]);
    let mut args = vec![
        "load",
        "--target",
        &serve.base,
        "--token",
        ADMIN,
        "--sessions",
        "20",
        "--turns",
        "5",
        "--concurrency",
        "20",
        "--latency",
        "40",
        "--chunks",
        "4",
        "--json",
    ];
    let (run, plain) = turnstile_json(&args);
    assert!(run.success, "{}", run.stderr);
    assert!(
        plain["ttfc_us"].is_null(),
        "no first chunk to time: {plain}"
    );
    args.push("--stream");
    let (run, report) = turnstile_json(&args);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(report["turns_ok"], 100, "{report}");
    assert_eq!(report["lost"], 0, "{report}");
    let ttfc = report["ttfc_us"]["p50"].as_u64().expect("ttfc p50");
    let whole = report["latency_us"]["p50"].as_u64().expect("latency p50");
    let share = ttfc as f64 / whole as f64;
    assert!(
        (0.1..0.7).contains(&share),
        "first chunk {ttfc} µs of {whole} µs"
    );
}
