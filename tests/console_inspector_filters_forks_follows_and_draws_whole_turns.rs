//! In a real browser, the inspector of a session whose turns each call a tool (the reference
//! time server, through a scripted model): a turn cut by the 50-event page is drawn whole, tool
//! bar included, and every turn on one time scale; times are the reader's local ones; the
//! events filter by kind and by text; an event's JSON forks the session there; a session live
//! in the server is read again while shown, so a new turn appears without a reload. Each
//! request to the model is drawn with its status and its first byte: two per tool turn, and
//! for a turn that failed after the agent's three retries, four failed tries, the failure's
//! code in the turn's line.

#![cfg(all(feature = "http", feature = "openai", feature = "mcp"))]

mod support;

use serde_json::{json, Value};
use support::browser::*;
use support::fake_openai::{FakeOpenAi, Reply};
use support::mcp::time;

/// Turns taken before the page is opened; each is four events (message, call, result, reply).
const TURNS: usize = 13;

const ROWS: &str = "return [...document.querySelectorAll('#event-rows tr')]
    .filter(tr => !tr.hidden).map(tr => Number(tr.dataset.seq));";

/// Per turn drawn: its first event's seq, its meta line and its bars' labels.
const TURNS_DRAWN: &str = "return [...document.querySelectorAll('#turns .turn')].map(t => [
    Number(t.dataset.seq), t.querySelector('.meta').textContent,
    [...t.querySelectorAll('.bar-label')].map(l => l.textContent)]);";

async fn turn(server: &Server, input: &str) {
    let answer = reqwest::Client::new()
        .post(server.url("/v1/sessions/alice/timed/turns"))
        .bearer_auth(ALICE)
        .json(&json!({ "input": input }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_draws_whole_turns_filters_forks_and_follows_a_live_session() {
    let mut script = Vec::new();
    for i in 0..TURNS {
        script.push(Reply::ToolCalls(vec![(
            format!("t{i}"),
            "get_current_time".into(),
            r#"{"timezone":"Etc/UTC"}"#.into(),
        )]));
        script.push(Reply::text(&["it is now"]));
    }
    // The last turn's request fails four times (the agent's three retries).
    for _ in 0..4 {
        script.push(Reply::Status {
            status: 500,
            retry_after: None,
            message: "overloaded".into(),
        });
    }
    let fake = FakeOpenAi::start(script).await;
    let mcp = format!("time=stdio:{}", time().display());
    let server = Server::with_agent(&[
        "--agent",
        "openai",
        "--base-url",
        &fake.base_url,
        "--model",
        "m",
        "--mcp",
        &mcp,
    ])
    .await;
    for i in 0..TURNS {
        turn(&server, &format!("what time is it ({i})?")).await;
    }
    let events = 4 * TURNS as u64;

    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser
        .client
        .goto(&server.url("/inspect#alice/timed"))
        .await
        .expect("open the inspector");
    until("the newest page of the log", || async {
        browser.eval(ROWS).await == json!((events - 49..=events).collect::<Vec<u64>>())
    })
    .await;
    // The page starts inside the first turn (#1 message, #2 call are on no page shown): that
    // turn is drawn whole all the same, and so is every other, each with its tool bar.
    browser
        .until_true(
            "every turn is drawn",
            &format!("return document.querySelectorAll('#turns .turn').length === {TURNS};"),
        )
        .await;
    let drawn: Vec<(u64, String, Vec<String>)> =
        serde_json::from_value(browser.eval(TURNS_DRAWN).await).expect("turns");
    for (i, (first, meta, labels)) in drawn.iter().enumerate() {
        assert_eq!(*first, 4 * i as u64 + 1, "turn {i} starts at its message");
        assert!(meta.contains("(final)"), "turn {i}: {meta}");
        assert!(
            labels
                .iter()
                .any(|l| l.starts_with("tool get_current_time: ")),
            "turn {i} has its tool bar: {labels:?}"
        );
        // Two requests to the model: the one that asked for the tool, the one that answered.
        let requests: Vec<&String> = labels
            .iter()
            .filter(|l| l.starts_with("model request "))
            .collect();
        assert_eq!(requests.len(), 2, "turn {i}: {labels:?}");
        assert!(
            requests[0].starts_with("model request 1 (200, first byte at ")
                && requests[1].starts_with("model request 2 (200, first byte at "),
            "turn {i}: {requests:?}"
        );
        // And the tokens the model said it used.
        let tokens = meta
            .rsplit_once("; 2 model requests; ")
            .map(|(_, usage)| usage.split(' ').collect::<Vec<_>>());
        assert!(
            tokens.as_ref().is_some_and(|t| t.len() == 5
                && t[0].parse::<u64>().is_ok_and(|n| n > 0)
                && t[1..3] == ["tokens", "in,"]
                && t[3].parse::<u64>().is_ok_and(|n| n > 0)
                && t[4] == "out"),
            "turn {i}: {meta}"
        );
    }
    let scale = browser
        .eval("return document.getElementById('turns-scale').textContent;")
        .await;
    assert!(scale.as_str().is_some_and(|s| s.contains(" ms")), "{scale}");

    // Local times: a <time> with the moment in UTC, shown as the browser's locale writes it.
    let times = browser
        .eval(
            "return [...document.querySelectorAll('#stats time')].map(t =>
                 [t.textContent === new Date(t.dateTime).toLocaleString(), t.title === t.dateTime,
                  /Z$/.test(t.textContent)]);",
        )
        .await;
    assert_eq!(
        times,
        json!([[true, true, false], [true, true, false]]),
        "created and updated"
    );

    // The filter, by kind and by text.
    browser
        .eval(
            "const k = document.getElementById('filter-kind'); k.value = 'tool_call';
             k.dispatchEvent(new Event('change')); return true;",
        )
        .await;
    let calls: Vec<u64> = serde_json::from_value(browser.eval(ROWS).await).unwrap();
    assert_eq!(
        calls,
        (0..TURNS as u64)
            .map(|i| 4 * i + 2)
            .filter(|s| *s > events - 50)
            .collect::<Vec<_>>()
    );
    let count = browser
        .eval("return document.getElementById('filter-count').textContent;")
        .await;
    assert!(
        count
            .as_str()
            .is_some_and(|c| c.starts_with("12 of the 50")),
        "{count}"
    );
    browser
        .eval(
            "const k = document.getElementById('filter-kind'); k.value = '';
             k.dispatchEvent(new Event('change'));
             const t = document.getElementById('filter-text'); t.value = '(7)';
             t.dispatchEvent(new Event('input')); return true;",
        )
        .await;
    assert_eq!(
        browser.eval(ROWS).await,
        json!([29]),
        "only the message with that text"
    );
    browser
        .eval(
            "const t = document.getElementById('filter-text'); t.value = '';
             t.dispatchEvent(new Event('input')); return true;",
        )
        .await;

    // Fork at #8 from that event's JSON.
    browser
        .click("#event-rows tr[data-seq=\"8\"] details summary")
        .await;
    browser
        .click("#event-rows tr[data-seq=\"8\"] .fork-here")
        .await;
    assert!(
        browser.focused("#fork-to").await,
        "the keyboard goes to the name"
    );
    assert_eq!(
        browser
            .eval("return document.getElementById('fork-seq').value;")
            .await,
        "8"
    );
    browser.type_into("#fork-to", "timed-fork").await;
    browser.press(fantoccini::key::Key::Enter).await;
    browser
        .until_true(
            "the fork is shown",
            "return location.hash === '#alice/timed-fork'
                 && document.getElementById('fork-result').textContent.startsWith('Forked at #8')
                 && document.querySelectorAll('#event-rows tr').length === 8;",
        )
        .await;

    // Back to the live session: a turn taken elsewhere appears without a reload.
    browser
        .client
        .goto(&server.url("/inspect#alice/timed"))
        .await
        .expect("back");
    browser
        .until_true(
            "the live session is shown",
            &format!("return document.querySelectorAll('#event-rows tr[data-seq=\"{events}\"]').length === 1;"),
        )
        .await;
    let marker = browser
        .eval("window.notReloaded = true; return true;")
        .await;
    assert_eq!(marker, Value::Bool(true));
    let answer = reqwest::Client::new()
        .post(server.url("/v1/sessions/alice/timed/turns"))
        .bearer_auth(ALICE)
        .json(&json!({ "input": "and now?" }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 502, "the model failed the turn");
    browser
        .until_true(
            "the failed turn appears without a reload, its code in its waterfall",
            &format!(
                "const t = document.querySelector('#turns .turn[data-seq=\"{}\"] .meta');
                 return window.notReloaded === true && !!t
                     && t.textContent.includes('failed: model_unavailable')
                     && t.textContent.endsWith('; 4 model requests (3 of them retries)');",
                events + 1
            ),
        )
        .await;
    let tries = browser
        .eval(&format!(
            "return [...document.querySelectorAll('#turns .turn[data-seq=\"{}\"] .bar-label')]
                 .map(l => l.textContent).filter(l => l.startsWith('model request'));",
            events + 1
        ))
        .await;
    let tries: Vec<String> = serde_json::from_value(tries).expect("labels");
    assert_eq!(tries.len(), 4, "{tries:?}");
    for (i, label) in tries.iter().enumerate() {
        let prefix = match i {
            0 => "model request 1 (500, first byte at ".to_owned(),
            n => format!("model request 1, try {} (500, first byte at ", n + 1),
        };
        assert!(label.starts_with(&prefix), "{i}: {tries:?}");
    }
    let failed_bars = browser
        .eval(&format!(
            "return document.querySelectorAll('#turns .turn[data-seq=\"{}\"] .wf-bar.model.failed').length;",
            events + 1
        ))
        .await;
    assert_eq!(failed_bars, 4, "each failed try is drawn as failed");
    browser.stop().await;
    server.stop().await;
}
