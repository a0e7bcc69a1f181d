//! A multi-channel bot, without HTTP: messages from two channels (a Slack-style one with
//! threads and a Discord-style one) go through a `ChannelRouter`; one person is paired across
//! both channels; a threaded group chat keeps one session per thread.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example channel_bot
//! ```
//!
//! It keeps sessions and pairings in a temporary file store and prints what each message was
//! routed to and answered.

use std::error::Error;

use async_trait::async_trait;
use turnstile::backend::FileStore;
use turnstile::{
    channel::ChannelMessage, channel::ChannelReply, channel::ChannelRouter,
    channel::FilePairingStore, Agent, AgentError, Runtime, TurnContext,
};

/// Answers with who spoke (the canonical user from the turn's attributes), where, and how long
/// the conversation is: enough to see the routing at work.
struct Receptionist;

#[async_trait]
impl Agent for Receptionist {
    async fn run(&self, turn: TurnContext) -> Result<String, AgentError> {
        let who = turn
            .attribute("user")
            .and_then(|v| v.as_str())
            .unwrap_or("someone");
        Ok(format!(
            "hello {who}, you said {:?} ({} earlier events here)",
            turn.input(),
            turn.history().len()
        ))
    }
}

fn show(reply: &ChannelReply) {
    println!(
        "  {:<28} from {:<12} -> {}",
        reply.route.key.session_id(),
        reply.route.user,
        reply.outcome.output
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let store = FileStore::open(dir.path())?;
    // The pairing store lives beside the sessions, in the same root.
    let pairings = FilePairingStore::open(&store)?;
    let runtime = Runtime::builder()
        .agent(Receptionist)
        .store(store)
        .build()?;
    let bot = ChannelRouter::new(runtime.clone(), pairings);

    // Alice is U123 on Slack and alice#42 on Discord: one person.
    bot.pair("slack", "U123", "alice").await?;
    bot.pair("discord", "alice#42", "alice").await?;

    println!("a direct message on each channel, from the same person:");
    show(
        &bot.send(ChannelMessage::new(
            "slack",
            "D-alice",
            "U123",
            "hi from slack",
        ))
        .await?,
    );
    show(
        &bot.send(ChannelMessage::new(
            "discord",
            "dm-7",
            "alice#42",
            "hi from discord",
        ))
        .await?,
    );

    println!("a group chat: two people, one conversation; each thread its own session:");
    let team = |who: &str, text: &str| ChannelMessage::new("slack", "C-team", who, text);
    show(&bot.send(team("U123", "standup in 5")).await?);
    show(&bot.send(team("U999", "on my way")).await?);
    show(
        &bot.send(team("U999", "the deploy failed").in_thread("T-1"))
            .await?,
    );
    show(
        &bot.send(team("U123", "looking at it").in_thread("T-1"))
            .await?,
    );
    show(&bot.send(team("U123", "lunch?").in_thread("T-2")).await?);

    println!("U999 was never paired, so their id is kept per channel (U999@slack).");
    runtime.shutdown().await;
    Ok(())
}
