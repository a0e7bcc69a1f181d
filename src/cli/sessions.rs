//! `turnstile sessions`: list, show, delete, garbage-collect, export and import the sessions of
//! a store, through the public `Store` trait. Readable output, or JSON with `--json`.
//!
//! It talks to the store directly, not to a running runtime: the file store allows one process
//! per root, so it refuses to open a root a running `turnstile serve` holds; with Redis, deleting
//! or collecting a session that another process has live is possible and that process's copy
//! wins at its next write (see `docs/load.md`).

mod check_acks;
mod delete;
mod format;
mod state_keys;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;
use turnstile::backend::{open_store, StoreUrl};
use turnstile::store::{GcPolicy, PageRequest, SessionMeta};
use turnstile::{SessionKey, Store};

use self::format::{clip, utc, HumanDuration};

/// Options of `turnstile sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// `file` (the data folder: $TURNSTILE_HOME, else $XDG_DATA_HOME/turnstile, else
    /// ~/.local/share/turnstile), `file:PATH`, `redis://HOST:PORT`,
    /// `redis+cluster://HOST:PORT[,HOST:PORT…]` (a Redis Cluster), `postgres://USER@HOST/DB`,
    /// `memory` or `file:tmp`.
    #[arg(long, global = true, default_value = "file")]
    store: StoreUrl,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Where `delete`, `delete-user` and `gc` also remove artifacts: `auto` (where `serve --artifacts
    /// auto` keeps them: a file store's `artifacts/` folder, the same Redis; none beside
    /// PostgreSQL), `off`, `file:DIR` or `redis://HOST:PORT`, as given to `serve`.
    #[arg(long, global = true, default_value = "auto")]
    artifacts: String,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// List a user's sessions (metadata only), a page at a time.
    List {
        /// The user whose sessions to list (`''` for anonymous sessions). Required: listing is
        /// per user.
        #[arg(long)]
        user: Option<String>,
        /// Sessions per page (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Continue after this cursor (printed at the end of the previous page).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Show a session's head and statistics.
    Show {
        /// The session, as `USER/SESSION`.
        key: SessionKey,
        /// Also show its newest N events.
        #[arg(long, default_value_t = 0)]
        events: usize,
        /// Label each state key with what this registry (TOML or JSON) declares of it, and
        /// show declared keys that are unset with their default.
        #[arg(long)]
        state_keys: Option<PathBuf>,
    },
    /// Delete a session (its head and log; shared state is kept) and its artifacts.
    Delete {
        /// The session, as `USER/SESSION`.
        key: SessionKey,
    },
    /// Delete every session of a user, the user's shared state, and every artifact of the user
    /// and its sessions.
    DeleteUser {
        /// The user id.
        user: String,
    },
    /// Remove sessions by age and count, and their artifacts.
    Gc {
        /// Keep at most this many sessions (the least recently updated go first).
        #[arg(long)]
        max_sessions: Option<usize>,
        /// Remove sessions not updated for this long: 30d, 12h, 15m, 90s.
        #[arg(long)]
        max_age: Option<HumanDuration>,
    },
    /// Print a session as one JSON document: {"schema_version", "key", "record", "events"}.
    Export {
        /// The session, as `USER/SESSION`.
        key: SessionKey,
        /// Write the document to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Check ack logs of `turnstile load --ack-log` against the store: every acknowledged turn
    /// present and answering its message, no load input stored twice or out of order. Exits 1
    /// when anything is wrong.
    CheckAcks {
        /// The ack logs.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Create a session from a document made by `export` (`-` reads stdin). A bad or
    /// newer-schema document, or an existing session, is refused and nothing is written.
    Import {
        /// The document.
        file: PathBuf,
    },
}

/// Runs `turnstile sessions`.
pub async fn run(args: SessionsArgs) -> Result<ExitCode, String> {
    let opened = open_store(&args.store).await.map_err(|e| e.to_string())?;
    let store = opened.store().as_ref();
    let json = args.json;
    match args.command {
        SessionsCommand::List {
            user,
            limit,
            cursor,
        } => {
            let user = user.ok_or(
                "listing is per user: pass --user USER (or --user '' for anonymous sessions)",
            )?;
            list(store, &user, PageRequest { limit, cursor }, json).await
        }
        SessionsCommand::Show {
            key,
            events,
            state_keys,
        } => {
            let keys = match state_keys {
                Some(path) => {
                    Some(turnstile::state_keys::StateKeys::load(&path).map_err(|e| e.to_string())?)
                }
                None => None,
            };
            show(store, &key, events, keys.as_ref(), json).await
        }
        SessionsCommand::CheckAcks { files } => check_acks::check_acks(store, &files, json).await,
        SessionsCommand::Delete { key } => {
            let artifacts = delete::Artifacts::open(&args.artifacts, &opened).await?;
            delete::delete(&opened, &artifacts, &key, json).await
        }
        SessionsCommand::DeleteUser { user } => {
            let artifacts = delete::Artifacts::open(&args.artifacts, &opened).await?;
            delete::delete_user(&opened, &artifacts, &user, json).await
        }
        SessionsCommand::Gc {
            max_sessions,
            max_age,
        } => {
            let artifacts = delete::Artifacts::open(&args.artifacts, &opened).await?;
            let policy = gc_policy(max_sessions, max_age)?;
            delete::gc(&opened, &artifacts, &policy, json).await
        }
        SessionsCommand::Export { key, output } => export(store, &key, output).await,
        SessionsCommand::Import { file } => import(store, &file, json).await,
    }
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(err) => eprintln!("turnstile: cannot encode the answer: {err}"),
    }
}

async fn list(
    store: &dyn Store,
    user: &str,
    page: PageRequest,
    json: bool,
) -> Result<ExitCode, String> {
    let page = store
        .list(user, &page)
        .await
        .map_err(|e| format!("cannot list the sessions of {user:?}: {e}"))?;
    if json {
        print_json(&page);
        return Ok(ExitCode::SUCCESS);
    }
    if page.sessions.is_empty() {
        println!("no sessions for user {user:?}");
    } else {
        // The key goes last, whole and in its canonical form, so that it can be pasted into
        // `show` or `delete` however long it is.
        println!(
            "{:>8} {:>7} {:>19}  KEY",
            "EVENTS", "TURNS", "UPDATED (UTC)"
        );
        for SessionMeta {
            key,
            events,
            updated_ms,
            stats,
            ..
        } in &page.sessions
        {
            println!(
                "{:>8} {:>7} {:>19}  {key}",
                events,
                stats.turns,
                utc(*updated_ms)
            );
        }
    }
    if let Some(cursor) = &page.next_cursor {
        println!("more: --cursor {cursor}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(
    store: &dyn Store,
    key: &SessionKey,
    newest: usize,
    keys: Option<&turnstile::state_keys::StateKeys>,
    json: bool,
) -> Result<ExitCode, String> {
    let loaded = store
        .load(key, newest)
        .await
        .map_err(|e| format!("cannot read {key}: {e}"))?;
    let Some(record) = &loaded.record else {
        return Err(format!("no session {key} in this store"));
    };
    if json {
        let mut doc = json!({ "key": key, "record": record, "events": loaded.events });
        if let Some(keys) = keys {
            doc["state_keys"] = state_keys::to_json(keys, &loaded, &record.state);
        }
        print_json(&doc);
        return Ok(ExitCode::SUCCESS);
    }
    let s = &record.stats;
    println!("session       {key}");
    println!(
        "schema        {}   version {}",
        record.schema_version, record.version
    );
    println!("created       {} UTC", utc(record.created_ms));
    println!("updated       {} UTC", utc(record.updated_ms));
    println!("events        {} (about {} bytes)", s.events, s.bytes);
    println!(
        "turns         {} (interrupted {}, superseded {}, merged {}); failed {}",
        s.turns, s.interrupted, s.superseded, s.merged, s.failed
    );
    println!("compactions   {}", s.compactions);
    let mean = s.total_turn_ms.checked_div(s.turns).unwrap_or(0);
    println!(
        "turn time     total {} ms, longest {} ms, mean {mean} ms",
        s.total_turn_ms, s.longest_turn_ms
    );
    println!("tokens        {}", tokens(s.input_tokens, s.output_tokens));
    println!(
        "state         {} session keys; summary {}; context cleared through #{}",
        record.state.len(),
        if record.summary.is_some() {
            "yes"
        } else {
            "none"
        },
        record.cleared_through
    );
    if record.shutdown_interrupted {
        println!("note          its last turn was cut short by a shutdown");
    }
    if let Some(keys) = keys {
        state_keys::print(keys, &loaded, &record.state);
    }
    for event in &loaded.events {
        let kind = serde_json::to_value(&event.kind)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
            .unwrap_or_default();
        println!(
            "  #{:<6} {:<6} {:<13} {}",
            event.seq,
            format!("{:?}", event.author).to_lowercase(),
            kind,
            clip(&format::event_text(event), 60)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Token usage as `show` prints it. The statistics keep sums only, so an agent that never
/// reported usage and one that reported zero tokens look alike; neither has anything to show.
fn tokens(input: u64, output: u64) -> String {
    if input == 0 && output == 0 {
        "not reported".to_owned()
    } else {
        format!("{input} in, {output} out")
    }
}

/// The policy `gc`'s flags ask for; at least one of them is required.
fn gc_policy(
    max_sessions: Option<usize>,
    max_age: Option<HumanDuration>,
) -> Result<GcPolicy, String> {
    if max_sessions.is_none() && max_age.is_none() {
        return Err("gc needs --max-sessions N, --max-age D (like 30d), or both".into());
    }
    Ok(GcPolicy {
        max_sessions,
        max_age: max_age.map(|d| d.0),
    })
}

async fn export(
    store: &dyn Store,
    key: &SessionKey,
    output: Option<PathBuf>,
) -> Result<ExitCode, String> {
    let doc = transfer::export(store, key)
        .await?
        .ok_or_else(|| format!("no session {key} in this store"))?;
    let text = serde_json::to_string_pretty(&doc).map_err(|e| format!("cannot encode: {e}"))?;
    match output {
        Some(path) => std::fs::write(&path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => println!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads at most [`transfer::MAX_IMPORT_BYTES`]; `None` when there is more.
fn read_bounded(source: impl std::io::Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(source, transfer::MAX_IMPORT_BYTES + 1),
        &mut buf,
    )?;
    Ok((buf.len() as u64 <= transfer::MAX_IMPORT_BYTES).then_some(buf))
}

async fn import(store: &dyn Store, file: &PathBuf, json: bool) -> Result<ExitCode, String> {
    let (bytes, what) = if file.as_os_str() == "-" {
        (read_bounded(std::io::stdin()), "stdin".to_owned())
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        (read_bounded(opened), file.display().to_string())
    };
    let bytes = bytes
        .map_err(|e| format!("cannot read {what}: {e}"))?
        .ok_or_else(|| {
            format!(
                "refused, nothing was written: {what} is larger than {} MiB, more than an export \
             document can be",
                transfer::MAX_IMPORT_BYTES >> 20
            )
        })?;
    let doc = transfer::parse(&bytes)?;
    let events = transfer::import(store, &doc).await?;
    if json {
        print_json(&json!({ "key": doc.key, "imported_events": events }));
    } else {
        println!("imported {} with {events} events", doc.key);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_usage_is_not_reported_rather_than_zero() {
        assert_eq!(tokens(0, 0), "not reported");
        assert_eq!(tokens(12, 0), "12 in, 0 out");
        assert_eq!(tokens(3, 40), "3 in, 40 out");
    }
}
