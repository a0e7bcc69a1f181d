//! `turnstile chat --url URL --api openai USER/SESSION`: the conversation through OpenAI's
//! routes on `serve` (`docs/openai-api.md`). The session is a conversation of the acting user
//! (`X-Turnstile-User` names it, so that an admin token acts for it too); its history is read
//! from `GET /v1/conversations/{id}/items`, each line is a streamed `POST /v1/responses` in it,
//! and Ctrl-C is `POST /v1/responses/{id}/cancel`. A conversation that does not exist yet is
//! made by the first response, under an id the server gives (`conv_…`), which the client takes
//! and shows.

use reqwest::{Method, RequestBuilder, StatusCode, Url};
use serde_json::{json, Value};

use super::{after_reply, json_of, unreachable, Remote, Said, REQUEST_TIMEOUT};

/// The most items OpenAI's routes give in one page: the history shown on opening is at most
/// this many.
const MAX_ITEMS_PAGE: usize = 100;

/// Longest conversation id the routes take.
const MAX_CONVERSATION_BYTES: usize = 64;

/// What the conversation's responses name as their model: the session's agent answers whatever
/// it names.
const MODEL: &str = "turnstile";

/// With `--api openai` the session must be one OpenAI's routes can name: 1–64 letters, digits,
/// `_` or `-` (a `conv_…` id is one of them).
pub(super) fn check_conversation(session: &str) -> Result<(), String> {
    let fits = !session.is_empty()
        && session.len() <= MAX_CONVERSATION_BYTES
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return Ok(());
    }
    Err(format!(
        "--api openai: {session:?} cannot name a conversation: give a session id of 1 to \
         {MAX_CONVERSATION_BYTES} letters, digits, '_' or '-' (a new one is made by the first \
         message, with an id the server gives), or use --api turnstile"
    ))
}

impl Remote {
    fn openai_request(&self, method: Method, url: Url) -> RequestBuilder {
        self.request(method, url)
            .header("x-turnstile-user", self.key.user_id())
    }

    /// Takes the conversation a response ran in; says so when it is not the one asked for (a
    /// new conversation made by the first message).
    pub(super) fn adopt(&self, conversation: Option<String>) -> Option<String> {
        let conversation = conversation?;
        let mut current = self.conversation.lock();
        if current.as_deref() == Some(conversation.as_str()) {
            return None;
        }
        let note = (conversation != self.key.session_id()).then(|| {
            format!(
                "[a new conversation, {conversation}: reopen it with {}/{conversation}]",
                self.key.user_id()
            )
        });
        *current = Some(conversation);
        note
    }
}

/// The conversation's newest `limit` messages as transcript lines (at most one page of the
/// items route), or a line saying the conversation is new.
pub(super) async fn history(remote: &Remote, limit: usize) -> Result<Vec<String>, String> {
    let id = remote.key.session_id();
    let mut url = remote.api_url(&["conversations", id, "items"]);
    let limit = limit.min(MAX_ITEMS_PAGE);
    url.query_pairs_mut()
        .append_pair("limit", &limit.max(1).to_string())
        .append_pair("order", "desc");
    let answer = remote
        .openai_request(Method::GET, url)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| unreachable(&remote.base, &e))?;
    if answer.status() == StatusCode::NOT_FOUND {
        return Ok(vec![format!(
            "--- no conversation {id} yet: the first message starts a new one ---"
        )]);
    }
    let page = json_of(answer).await?;
    *remote.conversation.lock() = Some(id.to_owned());
    let items = page["data"].as_array().cloned().unwrap_or_default();
    if items.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let heading = format!("--- the last {} messages ---", items.len());
    Ok(std::iter::once(heading)
        .chain(items.iter().rev().filter_map(shown))
        .collect())
}

/// One item as a transcript line: a message's text, the user's after `you> `.
fn shown(item: &Value) -> Option<String> {
    if item["type"] != "message" {
        return None;
    }
    let parts = item["content"].as_array()?;
    let text: String = parts
        .iter()
        .filter_map(|part| part["text"].as_str())
        .collect();
    let refusal: String = parts
        .iter()
        .filter_map(|part| part["refusal"].as_str())
        .collect();
    match item["role"].as_str()? {
        "user" => Some(format!("you> {text}")),
        _ if !refusal.is_empty() => Some(format!("{text}[refused] {refusal}")),
        _ if item["status"] == "incomplete" => Some(format!("{text} [interrupted]")),
        _ => Some(text),
    }
}

/// A streamed response of `text` in the conversation (a new one when it does not exist yet).
pub(super) fn response_request(remote: &Remote, text: &str) -> RequestBuilder {
    let mut body = json!({"model": MODEL, "input": text, "stream": true});
    if let Some(conversation) = remote.conversation.lock().clone() {
        body["conversation"] = json!(conversation);
    }
    remote
        .openai_request(Method::POST, remote.api_url(&["responses"]))
        .json(&body)
}

/// `POST /v1/responses/{id}/cancel`.
pub(super) fn cancel_url(remote: &Remote, id: &str) -> Url {
    remote.api_url(&["responses", id, "cancel"])
}

/// What one event of a streamed response says.
pub(super) fn said(name: &str, data: &Value) -> Said {
    let response = &data["response"];
    match name {
        "response.created" => Said::Began {
            id: response["id"].as_str().unwrap_or_default().to_owned(),
            conversation: response["conversation"]["id"].as_str().map(str::to_owned),
        },
        "response.output_text.delta" => {
            Said::Chunk(data["delta"].as_str().unwrap_or_default().to_owned())
        }
        // A refusal is not streamed as text: it comes whole, and is shown as one.
        "response.refusal.done" => Said::Chunk(format!(
            "[refused] {}",
            data["refusal"].as_str().unwrap_or_default()
        )),
        "response.completed" => Said::Ended(String::new()),
        "response.incomplete" => {
            let reason = response["incomplete_details"]["reason"].as_str();
            let (how, reason) = match reason {
                Some("superseded") => ("superseded", reason),
                Some("max_output_tokens") => ("incomplete", Some("max_tokens")),
                Some("content_filter") => ("incomplete", reason),
                _ => ("interrupted", reason),
            };
            Said::Ended(after_reply(Some(how), reason))
        }
        "response.failed" => Said::Failed(
            response["error"]["message"]
                .as_str()
                .unwrap_or("the response failed")
                .to_owned(),
        ),
        "error" => Said::Failed(
            data["error"]["message"]
                .as_str()
                .or(data["message"].as_str())
                .unwrap_or("failed")
                .to_owned(),
        ),
        _ => Said::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_the_routes_can_name_are_taken() {
        for good in ["conv_0123abcd", "support-1", "a"] {
            assert!(check_conversation(good).is_ok(), "{good}");
        }
        let long = "x".repeat(65);
        for bad in ["", "has space", "a/b", "ünïcode", long.as_str()] {
            let refused = check_conversation(bad).unwrap_err();
            assert!(refused.contains("cannot name a conversation"), "{refused}");
        }
    }

    #[test]
    fn the_stream_events_say_what_the_transcript_shows() {
        let created = json!({"response": {"id": "resp_1", "conversation": {"id": "conv_9"}}});
        assert_eq!(
            said("response.created", &created),
            Said::Began {
                id: "resp_1".into(),
                conversation: Some("conv_9".into())
            }
        );
        assert_eq!(
            said("response.output_text.delta", &json!({"delta": "hi"})),
            Said::Chunk("hi".into())
        );
        let cut = json!({"response": {"incomplete_details": {"reason": "requested"}}});
        assert_eq!(
            said("response.incomplete", &cut),
            Said::Ended("\n[interrupted]".into())
        );
        let limited = json!({"response": {"incomplete_details": {"reason": "max_output_tokens"}}});
        assert_eq!(
            said("response.incomplete", &limited),
            Said::Ended("\n[incomplete: the model reached its token limit]".into())
        );
        assert_eq!(
            said("response.refusal.done", &json!({"refusal": "I can't."})),
            Said::Chunk("[refused] I can't.".into())
        );
        let failed = json!({"response": {"error": {"message": "model down"}}});
        assert_eq!(
            said("response.failed", &failed),
            Said::Failed("model down".into())
        );
        assert_eq!(said("response.in_progress", &json!({})), Said::Nothing);
    }

    #[test]
    fn history_items_show_who_said_what() {
        let user = json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "hi"}]});
        assert_eq!(shown(&user).unwrap(), "you> hi");
        let cut = json!({"type": "message", "role": "assistant", "status": "incomplete",
            "content": [{"type": "output_text", "text": "par"}]});
        assert_eq!(shown(&cut).unwrap(), "par [interrupted]");
        assert_eq!(shown(&json!({"type": "function_call"})), None);
    }
}
