//! The platforms' side of the channel adapters' tests: a fake of the Telegram Bot API, the Slack
//! Web API and Discord's interaction webhooks on one loopback port, which records every call,
//! keeps the messages a bot posted and edited, hands out Telegram updates to long polling, and
//! answers 429 or 500 on command; and the requests the platforms send, built by their own SDKs
//! (`tests/support/channels/platforms.py`: python-telegram-bot, slack_sdk, PyNaCl).

#![cfg(feature = "http")]
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};

/// The Telegram bot token the fake accepts.
pub const TELEGRAM_TOKEN: &str = "123456:test-token";
/// The Slack bot token the fake accepts.
pub const SLACK_TOKEN: &str = "xoxb-test-token";
/// The Slack signing secret the tests sign with.
pub const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// The Telegram webhook's secret token.
pub const TELEGRAM_SECRET: &str = "webhook-secret-0123";
/// The seed of the Discord application's Ed25519 key pair.
pub const DISCORD_SEED: &str = "0707070707070707070707070707070707070707070707070707070707070707";
/// The Discord application's id.
pub const DISCORD_APP: &str = "1100";

/// One call a bot made.
#[derive(Debug, Clone)]
pub struct Call {
    /// `sendMessage`, `editMessageText`, `chat.postMessage`, `chat.update`, `discord.edit`,
    /// `discord.followup`, `getUpdates`.
    pub method: String,
    pub body: Value,
    /// The status the fake answered.
    pub status: u16,
}

/// A fault the fake answers instead of doing a call.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub status: u16,
    pub retry_after: Option<u64>,
}

#[derive(Default)]
struct Shared {
    calls: Mutex<Vec<Call>>,
    /// Per message key (`chat:id`), its texts in order (posted, then each edit).
    messages: Mutex<HashMap<String, Vec<String>>>,
    next_id: Mutex<u64>,
    faults: Mutex<HashMap<String, VecDeque<Fault>>>,
    updates: Mutex<Vec<Value>>,
    offsets: Mutex<Vec<i64>>,
    new_update: tokio::sync::Notify,
}

/// The running fake; it stops when dropped.
pub struct FakePlatform {
    /// `http://127.0.0.1:PORT`: the `api_base` of Telegram and Discord, and, with `/api`,
    /// Slack's.
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakePlatform {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakePlatform {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .route("/{bot}/{method}", post(telegram))
            .route("/api/{method}", post(slack))
            .route("/webhooks/{app}/{token}", post(discord_followup))
            .route("/webhooks/{app}/{token}/messages/{id}", patch(discord_edit))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { base, shared, task }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().clone()
    }

    /// The calls of `method` that succeeded.
    pub fn done(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method && c.status == 200)
            .collect()
    }

    /// Each posted message's texts, in order (posted, then each edit), by `chat:id`.
    pub fn messages(&self) -> HashMap<String, Vec<String>> {
        self.shared.messages.lock().clone()
    }

    /// The text every posted message of `chat` shows now, in the order they were posted.
    pub fn shown(&self, chat: &str) -> Vec<String> {
        let messages = self.shared.messages.lock();
        let mut ids: Vec<(u64, &String)> = messages
            .keys()
            .filter_map(|key| {
                let (c, id) = key.rsplit_once(':')?;
                (c == chat).then(|| Some((id.parse().ok()?, key)))?
            })
            .collect();
        ids.sort();
        ids.into_iter()
            .map(|(_, key)| messages[key].last().cloned().unwrap_or_default())
            .collect()
    }

    /// The next `count` calls of `method` answer `fault`.
    pub fn fail(&self, method: &str, count: usize, fault: Fault) {
        let mut faults = self.shared.faults.lock();
        let queue = faults.entry(method.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(fault, count));
    }

    /// Queues a Telegram update for `getUpdates`.
    pub fn push_update(&self, update: Value) {
        self.shared.updates.lock().push(update);
        self.shared.new_update.notify_waiters();
    }

    /// The offsets `getUpdates` was called with.
    pub fn offsets(&self) -> Vec<i64> {
        self.shared.offsets.lock().clone()
    }
}

impl Shared {
    fn fault(&self, method: &str) -> Option<Fault> {
        self.faults.lock().get_mut(method)?.pop_front()
    }

    fn record(&self, method: &str, body: &Value, status: u16) {
        self.calls.lock().push(Call {
            method: method.to_owned(),
            body: body.clone(),
            status,
        });
    }

    fn post(&self, chat: &str, text: &str) -> u64 {
        let id = {
            let mut next = self.next_id.lock();
            *next += 1;
            *next
        };
        self.messages
            .lock()
            .insert(format!("{chat}:{id}"), vec![text.to_owned()]);
        id
    }

    /// Edits a message; false when there is no such message.
    fn edit(&self, chat: &str, id: &str, text: &str) -> bool {
        match self.messages.lock().get_mut(&format!("{chat}:{id}")) {
            Some(texts) => {
                texts.push(text.to_owned());
                true
            }
            None => false,
        }
    }
}

fn faulted(fault: Fault, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(fault.status).unwrap(), Json(body)).into_response();
    if let Some(after) = fault.retry_after {
        response
            .headers_mut()
            .insert("retry-after", after.to_string().parse().unwrap());
    }
    response
}

async fn telegram(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if bot != format!("bot{TELEGRAM_TOKEN}") {
        shared.record(&method, &body, 401);
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401,
            "description": "Unauthorized"})),
        )
            .into_response();
    }
    if let Some(fault) = shared.fault(&method) {
        shared.record(&method, &body, fault.status);
        let mut error = json!({"ok": false, "error_code": fault.status,
            "description": "fault injected by the test"});
        if let Some(after) = fault.retry_after {
            error["parameters"] = json!({"retry_after": after});
        }
        return faulted(fault, error);
    }
    let chat = body["chat_id"].to_string();
    match method.as_str() {
        "sendMessage" => {
            let text = body["text"].as_str().unwrap_or_default();
            let id = shared.post(&chat, text);
            shared.record(&method, &body, 200);
            Json(json!({"ok": true, "result": {"message_id": id, "date": 0,
                "chat": {"id": body["chat_id"], "type": "private"}, "text": text}}))
            .into_response()
        }
        "editMessageText" => {
            let id = body["message_id"].to_string();
            let text = body["text"].as_str().unwrap_or_default();
            if shared.edit(&chat, &id, text) {
                shared.record(&method, &body, 200);
                Json(json!({"ok": true, "result": {"message_id": body["message_id"]}}))
                    .into_response()
            } else {
                shared.record(&method, &body, 400);
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"ok": false, "error_code": 400,
                    "description": "Bad Request: message to edit not found"})),
                )
                    .into_response()
            }
        }
        "getUpdates" => {
            let offset = body["offset"].as_i64().unwrap_or(0);
            shared.offsets.lock().push(offset);
            let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0))
                .min(Duration::from_secs(2));
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let notified = shared.new_update.notified();
                let ready: Vec<Value> = shared
                    .updates
                    .lock()
                    .iter()
                    .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                    .cloned()
                    .collect();
                if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                    shared.record(&method, &body, 200);
                    return Json(json!({"ok": true, "result": ready})).into_response();
                }
                let _ = tokio::time::timeout_at(deadline, notified).await;
            }
        }
        _ => (
            StatusCode::NOT_FOUND,
            Json(json!({"ok": false, "error_code": 404,
            "description": "Not Found: method not found"})),
        )
            .into_response(),
    }
}

async fn slack(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let authorised = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {SLACK_TOKEN}"));
    if !authorised {
        shared.record(&method, &body, 200);
        return Json(json!({"ok": false, "error": "invalid_auth"})).into_response();
    }
    if let Some(fault) = shared.fault(&method) {
        shared.record(&method, &body, fault.status);
        return faulted(fault, json!({"ok": false, "error": "ratelimited"}));
    }
    let chat = body["channel"].as_str().unwrap_or_default().to_owned();
    let text = body["text"].as_str().unwrap_or_default();
    match method.as_str() {
        "chat.postMessage" => {
            let id = shared.post(&chat, text);
            shared.record(&method, &body, 200);
            Json(json!({"ok": true, "channel": chat, "ts": id.to_string(),
                "message": {"type": "message", "text": text, "ts": id.to_string()}}))
            .into_response()
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default();
            if shared.edit(&chat, ts, text) {
                shared.record(&method, &body, 200);
                Json(json!({"ok": true, "channel": chat, "ts": ts, "text": text})).into_response()
            } else {
                shared.record(&method, &body, 200);
                Json(json!({"ok": false, "error": "message_not_found"})).into_response()
            }
        }
        _ => Json(json!({"ok": false, "error": "unknown_method"})).into_response(),
    }
}

async fn discord_followup(
    State(shared): State<Arc<Shared>>,
    Path((app, token)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    const METHOD: &str = "discord.followup";
    if let Some(fault) = shared.fault(METHOD) {
        shared.record(METHOD, &body, fault.status);
        return faulted(
            fault,
            json!({"message": "fault", "retry_after": fault.retry_after}),
        );
    }
    let text = body["content"].as_str().unwrap_or_default();
    let id = shared.post(&format!("{app}/{token}"), text);
    shared.record(METHOD, &body, 200);
    Json(json!({"id": id.to_string(), "content": text})).into_response()
}

async fn discord_edit(
    State(shared): State<Arc<Shared>>,
    Path((app, token, id)): Path<(String, String, String)>,
    Json(body): Json<Value>,
) -> Response {
    const METHOD: &str = "discord.edit";
    if let Some(fault) = shared.fault(METHOD) {
        shared.record(METHOD, &body, fault.status);
        return faulted(
            fault,
            json!({"message": "fault", "retry_after": fault.retry_after}),
        );
    }
    let chat = format!("{app}/{token}");
    let text = body["content"].as_str().unwrap_or_default();
    // The original response exists from the deferred answer on: its first edit creates it
    // here, as message 0.
    let id = if id == "@original" {
        "0".to_owned()
    } else {
        id
    };
    if !shared.edit(&chat, &id, text) {
        if id == "0" {
            shared
                .messages
                .lock()
                .insert(format!("{chat}:0"), vec![text.to_owned()]);
        } else {
            shared.record(METHOD, &body, 404);
            return (
                StatusCode::NOT_FOUND,
                Json(json!({"message": "Unknown Message"})),
            )
                .into_response();
        }
    }
    shared.record(METHOD, &body, 200);
    Json(json!({"id": id, "content": text})).into_response()
}

/// A request the platform would send: headers and the exact body.
#[derive(Debug, Clone)]
pub struct PlatformRequest {
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Runs `tests/support/channels/platforms.py` with `args` and reads its JSON answer; fails
/// saying what to install when the SDKs are missing.
pub fn sdk(args: &[&str]) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/channels/platforms.py"
    );
    let output = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs (scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "platforms.py {args:?} failed (python-telegram-bot, slack_sdk and PyNaCl are installed \
         by scripts/test.sh): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("platforms.py prints JSON")
}

/// A request built by [`sdk`].
pub fn request(args: &[&str]) -> PlatformRequest {
    let made = sdk(args);
    PlatformRequest {
        headers: made["headers"]
            .as_object()
            .map(|headers| {
                headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        body: made["body"].as_str().expect("a body").to_owned(),
    }
}

/// Posts `request` to `url` as the platform would, plus `more` headers.
pub async fn deliver(url: &str, request: &PlatformRequest, more: &[(&str, &str)]) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut builder = client
        .post(url)
        .header("content-type", "application/json")
        .body(request.body.clone());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    for (name, value) in more {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.expect("the request is answered");
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// Seconds since the Unix epoch, as the platforms stamp requests.
pub fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Writes a channels file into `dir` and returns its path.
pub fn channels_file(dir: &std::path::Path, toml: &str) -> std::path::PathBuf {
    let path = dir.join("channels.toml");
    std::fs::write(&path, toml).expect("write the channels file");
    path
}

/// The environment the channels files of these tests name their secrets by.
pub const SECRETS: [(&str, &str); 4] = [
    ("TEST_TELEGRAM_TOKEN", TELEGRAM_TOKEN),
    ("TEST_TELEGRAM_SECRET", TELEGRAM_SECRET),
    ("TEST_SLACK_TOKEN", SLACK_TOKEN),
    ("TEST_SLACK_SECRET", SLACK_SECRET),
];
