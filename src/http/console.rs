//! The pages `serve` shows: `/` (chat with one's sessions), `/console` (live sessions, for
//! operators) and `/inspect` (one session's state, timing, events and artifacts). Every asset is compiled into the binary; the pages hold no inline script or
//! style, and their Content-Security-Policy allows only this origin's files, so text a user
//! typed can never run as code even if some page code mistakenly wrote it as HTML. The pages
//! call the same JSON API as any client, with the token the person typed, kept in the tab's
//! `sessionStorage` and sent only in the `Authorization` header. `docs/console.md` describes
//! them.

use axum::extract::Path;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::error::ApiError;
use super::gateway::Gateway;

/// Scripts, styles, connections and images from this origin only; no inline script or style,
/// no plugin, no framing, no `<base>`, forms post nowhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const CHAT_PAGE: &str = include_str!("console/index.html");
const CONSOLE_PAGE: &str = include_str!("console/console.html");
const INSPECT_PAGE: &str = include_str!("console/inspect.html");

/// Files under `/assets/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("console/style.css"),
    },
    Asset {
        name: "common.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/common.js"),
    },
    // The Markdown parser the chat page renders replies with: markdown-it, vendored (MIT, its
    // licence at the top of the file; `scripts/vendor-markdown-it.sh` pins and re-vendors it)
    // so that the pages make no external request. `markdown.js` builds elements from its
    // tokens with text only.
    Asset {
        name: "markdown-it.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/vendor/markdown-it.min.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/markdown.js"),
    },
    Asset {
        name: "chat.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/chat.js"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/console.js"),
    },
    Asset {
        name: "sent.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/sent.js"),
    },
    Asset {
        name: "waterfall.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/waterfall.js"),
    },
    Asset {
        name: "inspect.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/inspect.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: FAVICON_TYPE,
        body: FAVICON,
    },
];

/// The pages' icon, also answered at `/favicon.ico` (which browsers ask for on their own) so
/// that no page load logs a 404.
const FAVICON: &str = include_str!("console/favicon.svg");
const FAVICON_TYPE: &str = "image/svg+xml";

/// The page routes. They need no token: the pages are the same for everyone and ask for one.
pub(crate) fn routes() -> Router<Gateway> {
    Router::new()
        .route("/", get(|| async { page(CHAT_PAGE) }))
        .route("/console", get(|| async { page(CONSOLE_PAGE) }))
        .route("/inspect", get(|| async { page(INSPECT_PAGE) }))
        .route("/assets/{name}", get(asset))
        .route("/favicon.ico", get(favicon))
}

fn page(html: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    common_headers(headers);
    response
}

async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    let asset = ASSETS
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| ApiError::NotFound("no such asset".into()))?;
    let mut response = ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response();
    common_headers(response.headers_mut());
    Ok(response)
}

async fn favicon() -> Response {
    let mut response = ([(header::CONTENT_TYPE, FAVICON_TYPE)], FAVICON).into_response();
    common_headers(response.headers_mut());
    response
}

/// No sniffing a type other than the one given, no `Referer` leaving the page, and no cache
/// that outlives a new binary's assets.
fn common_headers(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_carry_no_inline_script_or_style_and_name_only_embedded_assets() {
        for html in [CHAT_PAGE, CONSOLE_PAGE, INSPECT_PAGE] {
            let lower = html.to_lowercase();
            assert!(!lower.contains("<script>"), "an inline script");
            assert!(!lower.contains("<style"), "an inline style");
            assert!(!lower.contains(" style="), "an inline style attribute");
            assert!(!has_inline_handler(&lower), "an inline event handler");
            assert!(!lower.contains("http://") && !lower.contains("https://"));
            for src in lower
                .split("src=\"")
                .skip(1)
                .chain(lower.split("href=\"").skip(1))
            {
                let target = src.split('"').next().unwrap_or_default();
                if let Some(id) = target.strip_prefix('#') {
                    // A skip link: it must name an element of the same page.
                    assert!(
                        !id.is_empty() && lower.contains(&format!("id=\"{id}\"")),
                        "{target} names no element of its page"
                    );
                    continue;
                }
                let name = target.trim_start_matches("/assets/");
                assert!(
                    ["/", "/console", "/inspect"].contains(&target)
                        || ASSETS.iter().any(|a| a.name == name),
                    "{target} is not embedded"
                );
            }
        }
    }

    /// Whether `html` has an attribute such as ` onclick=`.
    fn has_inline_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let name = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            name > 0 && rest[name..].starts_with('=')
        })
    }

    #[test]
    fn scripts_never_write_html() {
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(
                    !asset.body.contains(forbidden),
                    "{} uses {forbidden}",
                    asset.name
                );
            }
        }
    }
}
