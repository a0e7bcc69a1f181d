//! In a real browser: the inspector (`/inspect#USER/SESSION`), reached by keyboard from the
//! chat page and from a console row, shows a session's statistics, its raw event log a page of
//! 50 at a time (each event's JSON), and a timing waterfall per turn; it has no serious or
//! critical axe-core violation and fits the window at 1280 and 360 px; a user token cannot
//! inspect another user's session (the page says so and shows none of it); an admin sets a
//! session key from it.

#![cfg(feature = "http")]

mod support;

use fantoccini::key::Key;
use serde_json::{json, Value};
use support::browser::*;

const ROWS: &str =
    "return [...document.querySelectorAll('#event-rows tr')].map(tr => Number(tr.dataset.seq));";

async fn turn(server: &Server, token: &str, user: &str, session: &str, input: &str) {
    let answer = reqwest::Client::new()
        .post(server.url(&format!("/v1/sessions/{user}/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({ "input": input }))
        .send()
        .await
        .expect("a turn");
    assert_eq!(answer.status(), 200, "{user}/{session}");
}

async fn accessible(browser: &Browser, what: &str, width: u32) {
    let violations = browser.axe_serious().await;
    assert!(
        violations.is_empty(),
        "{what} at {width} px: serious or critical axe-core violations:\n{}",
        violations.join("\n")
    );
    let laid_out = browser.layout_width().await;
    assert!(
        laid_out <= u64::from(width),
        "{what} at {width} px is {laid_out} px wide"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_pages_the_log_draws_turns_and_keeps_users_apart() {
    // Declared keys: the inspector lists them, and offers the form the ones the caller may set.
    let registry = tempfile::tempdir().expect("a temporary folder");
    let registry_file = registry.path().join("keys.toml");
    std::fs::write(
        &registry_file,
        "mode = \"warn\"\n[keys.mood]\ntype = \"string\"\ndefault = \"neutral\"\n\
         description = \"How the agent sounds\"\neditable = true\n\
         [keys.plan]\ntype = \"string\"\ndescription = \"Billing plan\"\n\
         [keys.\"user:name\"]\ntype = \"string\"\n",
    )
    .expect("write the registry");
    let registry_file = registry_file.to_str().expect("a UTF-8 path");
    let server = Server::with_agent(&[
        "--agent",
        "mock",
        "--latency",
        "30",
        "--chunks",
        "2",
        "--state-keys",
        registry_file,
    ])
    .await;
    // 26 turns: 52 events, so the log has two pages.
    for i in 0..26 {
        turn(
            &server,
            ALICE,
            "alice",
            "inspected",
            &format!("message {i}"),
        )
        .await;
    }
    turn(&server, ADMIN, "bob", "private", "bob's secret").await;

    for (width, height) in [DESKTOP, PHONE] {
        let browser = Browser::sized(width, height).await;
        browser.sign_in(&server.url("/"), ALICE, None).await;
        browser.open_session("inspected").await;
        browser.tab_to("#inspect-link", 40).await;
        browser.press(Key::Enter).await;
        until("the inspector shows the newest page of the log", || async {
            browser.eval(ROWS).await == json!((3..=52).collect::<Vec<u64>>())
        })
        .await;
        let stats = browser
            .eval("return document.getElementById('stats').textContent;")
            .await;
        assert!(
            stats.as_str().is_some_and(|s| s.contains("events52")),
            "{stats}"
        );
        let json = browser
            .eval(
                "return document.querySelector('#event-rows tr[data-seq=\"52\"] pre').textContent;",
            )
            .await;
        let event: Value = serde_json::from_str(json.as_str().expect("text")).expect("JSON");
        assert_eq!(event["seq"], 52);
        assert_eq!(event["kind"]["type"], "agent_output");
        let turns = browser
            .eval("return [...document.querySelectorAll('#turns .turn')].map(t => [...t.querySelectorAll('.bar-label')].map(l => l.textContent));")
            .await;
        let turns: Vec<Vec<String>> = serde_json::from_value(turns).expect("labels");
        assert_eq!(
            turns.len(),
            25,
            "every whole turn shown is drawn: {turns:?}"
        );
        for labels in &turns {
            // The mock agent takes 30 ms in two chunks: the agent's bar says so, and the time
            // to its first chunk is part of it.
            let ms = |name: &str| -> u64 {
                let label = labels
                    .iter()
                    .find(|l| l.starts_with(name))
                    .unwrap_or_else(|| panic!("no {name:?} bar in {labels:?}"));
                label[name.len() + 2..label.len() - 3]
                    .parse()
                    .expect("milliseconds")
            };
            assert!(labels[0].starts_with("queued: "), "{labels:?}");
            let agent = ms("agent");
            assert!(agent >= 25, "{labels:?}");
            assert!(ms("first chunk streamed") <= agent, "{labels:?}");
        }
        let declared = browser
            .eval("return [...document.querySelectorAll('#declared-rows tr')].map(tr => [...tr.cells].map(c => c.textContent));")
            .await;
        assert_eq!(
            declared,
            json!([
                [
                    "mood",
                    "string",
                    "\"neutral\"",
                    "yes",
                    "How the agent sounds"
                ],
                ["plan", "string", "–", "no", "Billing plan"],
                ["user:name", "string", "–", "no", ""]
            ])
        );
        let settable = browser
            .eval(
                "return [...document.querySelectorAll('#settable-keys option')].map(o => o.value);",
            )
            .await;
        assert_eq!(
            settable,
            json!(["mood"]),
            "a user token sets only editable keys"
        );
        accessible(&browser, "the inspector", width).await;
        browser
            .eval("document.getElementById('h-timing').scrollIntoView(); return true;")
            .await;
        browser
            .screenshot(&format!("inspector-timing-{width}px"))
            .await;

        browser.click("#events-older").await;
        until("the older page", || async {
            browser.eval(ROWS).await == json!((1..=50).collect::<Vec<u64>>())
        })
        .await;

        // Another user's session: refused, nothing of it shown.
        browser
            .eval("location.hash = 'bob/private'; return true;")
            .await;
        until("bob's session is refused", || async {
            browser
                .eval("const n = document.getElementById('notice'); return n.hidden ? '' : n.textContent;")
                .await
                .as_str()
                .is_some_and(|n| n.contains("Not your session"))
        })
        .await;
        let page = browser.eval("return document.body.textContent;").await;
        assert!(!page.as_str().unwrap_or_default().contains("bob's secret"));
        browser.stop().await;
    }

    // From a console row, by keyboard.
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/console"), ADMIN, None).await;
    let link = "#live-rows tr[data-key=\"bob/private\"] a.inspect";
    browser.visible(link).await;
    browser.tab_to(link, 60).await;
    browser.press(Key::Enter).await;
    until("the admin inspects bob's session", || async {
        browser.eval(ROWS).await == json!([1, 2])
    })
    .await;
    let page = browser
        .eval("return document.getElementById('event-rows').textContent;")
        .await;
    assert!(page.as_str().unwrap_or_default().contains("bob's secret"));

    let settable = browser
        .eval("return [...document.querySelectorAll('#settable-keys option')].map(o => o.value);")
        .await;
    assert_eq!(
        settable,
        json!(["mood", "plan"]),
        "an admin sets any session key"
    );
    // The admin sets a session key from the inspector, by keyboard: it shows in the state and
    // the log gains the note that carries it.
    browser.type_into("#state-key", "mood").await;
    browser.type_into("#state-value", "\"calm\"").await;
    browser.press(Key::Enter).await;
    until("the key is set and shown", || async {
        let state = browser
            .eval("return document.getElementById('state-rows').textContent;")
            .await;
        state
            .as_str()
            .is_some_and(|s| s.contains("mood") && s.contains("\"calm\""))
            && browser.eval(ROWS).await == json!([1, 2, 3])
    })
    .await;
    let said = browser
        .eval("return document.getElementById('state-result').textContent;")
        .await;
    assert_eq!(said, "Set mood (event 3).");
    // Text that is not JSON is refused on the page, nothing sent.
    browser
        .eval("document.getElementById('state-value').value = ''; return true;")
        .await;
    browser.type_into("#state-value", "calm").await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the page says the value is not JSON",
            "return document.getElementById('state-result').textContent.includes('not JSON');",
        )
        .await;
    assert_eq!(browser.eval(ROWS).await, json!([1, 2, 3]));
    // A key the server refuses (shared keys are not set here): the banner and the line beside
    // the form both say so — the line no longer shows the earlier success.
    let clear =
        "for (const id of ['state-key', 'state-value']) document.getElementById(id).value = '';
        return true;";
    browser.eval(clear).await;
    browser.type_into("#state-key", "user:shared").await;
    browser.type_into("#state-value", "1").await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the refusal is on the banner and beside the form",
            "const n = document.getElementById('notice');
             return !n.hidden && document.getElementById('state-result').textContent
                 .startsWith('Not set: ');",
        )
        .await;
    // A later success leaves nothing of the refusal on the page.
    browser.eval(clear).await;
    browser.type_into("#state-key", "mood").await;
    browser.type_into("#state-value", "\"warm\"").await;
    browser.press(Key::Enter).await;
    browser
        .until_true(
            "the success replaces the refusal everywhere",
            "return document.getElementById('notice').hidden
                && document.getElementById('state-result').textContent.startsWith('Set mood');",
        )
        .await;
    accessible(&browser, "the inspector with its state form", DESKTOP.0).await;
    browser.stop().await;
    server.stop().await;
}
