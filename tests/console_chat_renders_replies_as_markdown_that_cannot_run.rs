//! In a real browser: a reply is rendered as Markdown — headings (under the conversation's own), emphasis, inline code, code
//! blocks in a monospaced font, tables, links that open elsewhere with no referrer — while it
//! streams and once stored, also after a reload; raw HTML, `javascript:` links and images in a
//! reply stay inert (no element is made from them, nothing runs, nothing is fetched); the user's
//! own message stays the text it is. Tool calls and their results are collapsed blocks that open
//! on a click.

#![cfg(all(feature = "http", feature = "openai", feature = "mcp"))]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::browser::*;
use support::fake_openai::{FakeOpenAi, Reply};
use support::mcp::time;

/// What the user writes; the mock agent's reply quotes it after `mock reply #1 to: `.
const MARKDOWN: &str =
    "see below\n# A heading\n**bold** and `code`, a [link](https://example.com/a) \
and a [trap](javascript:window.ran=true).\n\n| name | count |\n|:-----|------:|\n| apples | 2 |\n\n\
```rust\nfn main() {}\n```\n\n1. one\n2. two\n\n5) five\n\n<img src=x onerror=alert(1)><script>window.ran = true</script> \
![pic](javascript:alert(1)) ![remote](https://example.com/x.png)";

const TRAP: &str = "window.alerted = false; window.ran = false;
    window.alert = () => { window.alerted = true; }; return true;";

/// What the reply (the second item) shows, as one object; and whether anything ran.
const REPLY: &str = "const li = document.querySelectorAll('#history li')[1];
    const text = li.querySelector('.text');
    const code = text.querySelector('pre code');
    const links = [...text.querySelectorAll('a')];
    return {
      h3: text.querySelector('h3')?.textContent ?? null,
      higher: text.querySelectorAll('h1, h2').length,
      strong: text.querySelector('strong')?.textContent ?? null,
      inline: text.querySelector('p code')?.textContent ?? null,
      block: code?.textContent ?? null,
      language: code?.dataset.language ?? null,
      mono: code ? getComputedStyle(code).fontFamily : '',
      th: [...text.querySelectorAll('th')].map(x => x.textContent),
      right: text.querySelector('td.align-right')?.textContent ?? null,
      ols: [...text.querySelectorAll('ol')].map(o => [o.start, o.children.length]),
      links: links.map(a => [a.getAttribute('href'), a.rel, a.target, a.textContent]),
      trap: text.textContent.includes('trap'),
      unsafe: document.querySelectorAll('#history img, #history script, #history iframe').length,
      ran: window.ran === true || window.alerted === true,
    };";

fn check_rendered(reply: &Value, moment: &str) {
    assert_eq!(
        reply["h3"], "A heading",
        "{moment}: `#` sits under the conversation's heading: {reply}"
    );
    assert_eq!(reply["higher"], 0, "{moment}: {reply}");
    assert_eq!(reply["strong"], "bold", "{moment}: {reply}");
    assert_eq!(reply["inline"], "code", "{moment}: {reply}");
    assert_eq!(reply["block"], "fn main() {}", "{moment}: {reply}");
    assert_eq!(reply["language"], "rust", "{moment}: {reply}");
    assert!(
        reply["mono"].as_str().unwrap().contains("monospace"),
        "{moment}: code is monospaced: {reply}"
    );
    assert_eq!(
        reply["th"],
        serde_json::json!(["name", "count"]),
        "{moment}"
    );
    assert_eq!(reply["right"], "2", "{moment}: a right-aligned column");
    assert_eq!(
        reply["ols"],
        serde_json::json!([[1, 2], [5, 1]]),
        "{moment}: lists numbered from where they start"
    );
    // The one safe link, opening elsewhere with no referrer; the image became a link to its
    // address (nothing fetched); the `javascript:` link and image are only text.
    assert_eq!(
        reply["links"],
        serde_json::json!([
            [
                "https://example.com/a",
                "noopener noreferrer nofollow",
                "_blank",
                "link"
            ],
            [
                "https://example.com/x.png",
                "noopener noreferrer nofollow",
                "_blank",
                "image: remote"
            ]
        ]),
        "{moment}"
    );
    assert_eq!(
        reply["trap"], true,
        "{moment}: the refused link's text stays"
    );
    assert_eq!(reply["unsafe"], 0, "{moment}: no element from raw HTML");
    assert_eq!(reply["ran"], false, "{moment}: nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_rendered_as_markdown_while_it_streams_and_once_stored() {
    // Eight chunks over four seconds: the page is seen rendering a part of the reply.
    let server = Server::start(Duration::from_secs(4), 8).await;
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("md").await;
    browser.eval(TRAP).await;
    browser.send_whole(MARKDOWN).await;
    browser
        .until_true(
            "the streaming reply shows rendered Markdown",
            "const li = document.querySelector('#history li[data-state=streaming]');
             return !!li && li.querySelector('.text strong')?.textContent === 'bold';",
        )
        .await;
    browser.until_stored("the stored turn is shown", 2).await;
    check_rendered(&browser.eval(REPLY).await, "after the turn");
    let mine = browser
        .eval(
            "const li = document.querySelectorAll('#history li')[0];
             return [li.querySelector('.text').textContent, li.querySelectorAll('.text *').length];",
        )
        .await;
    assert_eq!(
        mine,
        serde_json::json!([MARKDOWN, 0]),
        "the user's own message is its text"
    );

    browser.client.refresh().await.expect("reload");
    browser.eval(TRAP).await;
    browser
        .until_stored("the stored turn after a reload", 2)
        .await;
    check_rendered(&browser.eval(REPLY).await, "after a reload");
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "no alert is open"
    );
    browser.stop().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_results_are_collapsed_blocks_that_open() {
    let fake = FakeOpenAi::start(vec![
        Reply::ToolCalls(vec![(
            "t1".into(),
            "get_current_time".into(),
            r#"{"timezone":"Etc/UTC"}"#.into(),
        )]),
        Reply::text(&["It is **now**."]),
    ])
    .await;
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
    let browser = Browser::start().await;
    browser.sign_in(&server.url("/"), ALICE, None).await;
    browser.open_session("tools").await;
    browser.send("what time is it?").await;
    browser
        .until_stored("the turn with its tool round", 4)
        .await;
    let blocks = "return [...document.querySelectorAll('#history li')].map(li => {
        const d = li.querySelector('details.tool');
        return d ? [d.open, d.querySelector('summary').textContent,
                    d.querySelector('pre').textContent] : null; });";
    let shown = browser.eval(blocks).await;
    let shown = shown.as_array().expect("items");
    assert!(shown[0].is_null() && shown[3].is_null(), "{shown:?}");
    assert_eq!(shown[1][0], false, "a call starts closed: {shown:?}");
    assert_eq!(shown[1][1], "get_current_time");
    assert!(
        shown[1][2]
            .as_str()
            .unwrap()
            .contains("\"timezone\": \"Etc/UTC\""),
        "the arguments, indented: {shown:?}"
    );
    assert_eq!(shown[2][0], false, "a result starts closed: {shown:?}");
    assert_eq!(shown[2][1], "get_current_time: ok");
    assert!(
        shown[2][2].as_str().unwrap().contains("Etc/UTC"),
        "the result: {shown:?}"
    );
    browser
        .click("#history li:nth-child(2) details.tool summary")
        .await;
    browser
        .until_true(
            "a click opens the call",
            "return document.querySelector('#history li:nth-child(2) details.tool').open;",
        )
        .await;
    let reply = browser
        .eval("return document.querySelector('#history li:nth-child(4) .text strong')?.textContent ?? null;")
        .await;
    assert_eq!(reply, "now", "the reply after the tool is Markdown too");
    browser.stop().await;
    server.stop().await;
}
