//! [`ChannelMessage`]: a message as a channel delivers it, before it is routed (see
//! [`crate::channel`]). A room of its own, below the inbox that keeps such messages and the
//! router that routes them.

/// A message as a channel delivers it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChannelMessage {
    /// Which channel it came from (`slack`, `discord`, `web`); see [`validate_channel`].
    pub channel: String,
    /// The chat (conversation, room, group, DM) on that channel.
    pub chat: String,
    /// The thread inside the chat, if the channel has threads and the message is in one. Each
    /// thread is a session of its own.
    pub thread: Option<String>,
    /// The sender's id on that channel.
    pub channel_user: String,
    /// What they wrote.
    pub input: String,
}

impl ChannelMessage {
    /// A message outside any thread.
    pub fn new(
        channel: impl Into<String>,
        chat: impl Into<String>,
        channel_user: impl Into<String>,
        input: impl Into<String>,
    ) -> Self {
        Self {
            channel: channel.into(),
            chat: chat.into(),
            thread: None,
            channel_user: channel_user.into(),
            input: input.into(),
        }
    }

    /// The same message, inside `thread`.
    pub fn in_thread(mut self, thread: impl Into<String>) -> Self {
        self.thread = Some(thread.into());
        self
    }
}
