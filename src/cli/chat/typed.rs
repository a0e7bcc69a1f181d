//! What a person types, kept apart from the reply being streamed. While a reply streams, the
//! terminal does not echo (the typed text would land inside the reply); the lines typed
//! meanwhile are read and kept, and after the reply each is shown at its own prompt and sent
//! in turn, as if typed then.

use std::collections::VecDeque;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, Lines};

/// Most lines kept while one reply streams: past it, the rest wait unread in the terminal.
const MAX_EARLY_LINES: usize = 16;

/// Lines from the input, with those typed during a reply held back until it ends.
pub(crate) struct Typed<R> {
    lines: Lines<R>,
    /// Lines typed during the last reply, oldest first, not yet answered.
    early: VecDeque<String>,
    /// The input ended (Ctrl-D) during a reply: the conversation ends once the early lines are
    /// answered.
    ended: bool,
    /// Whether the input is the program's terminal, whose echo this may turn off.
    terminal: bool,
    /// Reading the input failed during a reply: told once the reply ended, not in its middle.
    failed: Option<std::io::Error>,
}

/// A line to answer, and whether the terminal showed it as it was typed.
pub(crate) struct Line {
    pub text: String,
    /// False for a line typed during a reply: its prompt shows it when its turn comes.
    pub echoed: bool,
}

impl<R: AsyncBufRead + Unpin> Typed<R> {
    /// Lines from `input`; `terminal` when it is the program's own standard input (its echo is
    /// then turned off while a reply streams, if it is a terminal).
    pub(crate) fn new(input: R, terminal: bool) -> Self {
        Self {
            lines: input.lines(),
            early: VecDeque::new(),
            ended: false,
            terminal,
            failed: None,
        }
    }

    /// The next line to answer: one typed during the last reply first, else the next one typed
    /// (waiting for it); `None` once the input ended. Cancel-safe: a line read is never lost.
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<Line>> {
        if let Some(text) = self.early.pop_front() {
            return Ok(Some(Line {
                text,
                echoed: false,
            }));
        }
        if let Some(failed) = self.failed.take() {
            return Err(failed);
        }
        if self.ended {
            return Ok(None);
        }
        let text = self.lines.next_line().await?;
        Ok(text.map(|text| Line { text, echoed: true }))
    }

    /// While a reply streams: reads a line typed meanwhile and keeps it for later. Pending
    /// forever once the input ended or failed or enough lines are kept, so that a `select!`
    /// goes on with the reply; a failure to read is told by [`Typed::next`] after the reply.
    /// Cancel-safe.
    pub(crate) async fn keep_early(&mut self) {
        if self.ended || self.failed.is_some() || self.early.len() >= MAX_EARLY_LINES {
            return std::future::pending().await;
        }
        match self.lines.next_line().await {
            Ok(Some(text)) => self.early.push_back(text),
            Ok(None) => self.ended = true,
            Err(failed) => self.failed = Some(failed),
        }
    }

    /// Turns the terminal's echo off until the guard drops (nothing when the input is not the
    /// program's terminal).
    pub(crate) fn quiet(&self) -> Quiet {
        Quiet::begin(self.terminal)
    }
}

/// The terminal's echo is off while this lives; dropping it restores the settings it found.
pub(crate) struct Quiet {
    #[cfg(unix)]
    saved: Option<rustix::termios::Termios>,
}

impl Quiet {
    #[cfg(unix)]
    fn begin(terminal: bool) -> Self {
        use rustix::termios::{isatty, tcgetattr, tcsetattr, LocalModes, OptionalActions};
        let stdin = std::io::stdin();
        if !terminal || !isatty(&stdin) {
            return Self { saved: None };
        }
        let Ok(saved) = tcgetattr(&stdin) else {
            return Self { saved: None };
        };
        let mut quiet = saved.clone();
        quiet.local_modes.remove(LocalModes::ECHO);
        match tcsetattr(&stdin, OptionalActions::Now, &quiet) {
            Ok(()) => Self { saved: Some(saved) },
            Err(_) => Self { saved: None },
        }
    }

    #[cfg(not(unix))]
    fn begin(_terminal: bool) -> Self {
        Self {}
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            use rustix::termios::{tcsetattr, OptionalActions};
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_typed_during_a_reply_come_first_and_unechoed_then_the_rest() {
        let input: &[u8] = b"during one\nduring two\nafter\n";
        let mut typed = Typed::new(input, false);
        typed.keep_early().await;
        typed.keep_early().await;
        let mut got = Vec::new();
        while let Some(line) = typed.next().await.unwrap() {
            got.push((line.text, line.echoed));
        }
        assert_eq!(
            got,
            vec![
                ("during one".to_owned(), false),
                ("during two".to_owned(), false),
                ("after".to_owned(), true)
            ]
        );
    }

    #[tokio::test]
    async fn an_input_that_ends_during_a_reply_ends_after_its_early_lines() {
        let input: &[u8] = b"last words\n";
        let mut typed = Typed::new(input, false);
        typed.keep_early().await;
        typed.keep_early().await;
        assert!(typed.ended);
        assert_eq!(typed.next().await.unwrap().unwrap().text, "last words");
        assert!(typed.next().await.unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_bound_is_kept_during_one_reply() {
        let input = "x\n".repeat(MAX_EARLY_LINES + 5);
        let mut typed = Typed::new(input.as_bytes(), false);
        for _ in 0..MAX_EARLY_LINES {
            typed.keep_early().await;
        }
        let more = tokio::time::timeout(std::time::Duration::from_secs(1), typed.keep_early());
        assert!(more.await.is_err(), "a full queue reads no further");
        assert_eq!(typed.early.len(), MAX_EARLY_LINES);
    }

    #[tokio::test]
    async fn a_failed_read_during_a_reply_is_told_after_it() {
        // Not UTF-8: the read of that line fails.
        let input: &[u8] = b"fine\n\xff\xfe\n";
        let mut typed = Typed::new(input, false);
        typed.keep_early().await;
        typed.keep_early().await;
        assert!(typed.failed.is_some(), "kept, not returned mid-reply");
        assert_eq!(typed.next().await.unwrap().unwrap().text, "fine");
        assert!(typed.next().await.is_err(), "told at the prompt");
    }
}
