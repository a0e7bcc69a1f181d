//! What the binary writes to a terminal, with control characters made visible: a reply in
//! `turnstile chat`, a stored history line or a server's error message is untrusted text, and an
//! escape sequence in it would otherwise drive the terminal (retitle the window, clear the
//! screen, move the cursor, rewrite what was shown).

use std::io::{self, Write};

/// A writer that passes text through with every control character shown as text: C0 controls
/// and DEL in caret notation (`ESC` as `^[`, `BEL` as `^G`, `DEL` as `^?`), C1 controls and the
/// bidirectional formatting characters as `\u{…}`. Newline and tab pass as they are. Bytes that
/// are not UTF-8 are shown as `\x..`; a character split across two writes is kept until its
/// end arrives.
pub(crate) struct Visible<W> {
    out: W,
    /// The start of a character whose remaining bytes have not been written yet.
    partial: Vec<u8>,
}

impl<W: Write> Visible<W> {
    /// Wraps `out`.
    pub(crate) fn new(out: W) -> Self {
        Self {
            out,
            partial: Vec::new(),
        }
    }

    /// Writes `text` with its control characters made visible.
    fn put(&mut self, text: &str) -> io::Result<()> {
        let mut plain = 0;
        for (at, c) in text.char_indices() {
            if let Some(shown) = shown(c) {
                self.out.write_all(&text.as_bytes()[plain..at])?;
                self.out.write_all(shown.as_bytes())?;
                plain = at + c.len_utf8();
            }
        }
        self.out.write_all(&text.as_bytes()[plain..])
    }
}

/// How `c` is shown, if it is a control character.
fn shown(c: char) -> Option<String> {
    match c {
        '\n' | '\t' => None,
        '\u{0}'..='\u{1f}' => Some(format!("^{}", char::from(c as u8 + 0x40))),
        '\u{7f}' => Some("^?".to_owned()),
        '\u{80}'..='\u{9f}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => Some(format!("\\u{{{:x}}}", c as u32)),
        _ => None,
    }
}

impl<W: Write> Write for Visible<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut bytes = std::mem::take(&mut self.partial);
        bytes.extend_from_slice(buf);
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.put(text)?;
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    self.put(std::str::from_utf8(valid).expect("checked as UTF-8"))?;
                    match e.error_len() {
                        // The last character's end is still to come.
                        None => {
                            self.partial = after.to_vec();
                            break;
                        }
                        Some(len) => {
                            for byte in &after[..len] {
                                write!(self.out, "\\x{byte:02x}")?;
                            }
                            rest = &after[len..];
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(pieces: &[&[u8]]) -> String {
        let mut shown = Vec::new();
        let mut visible = Visible::new(&mut shown);
        for piece in pieces {
            visible.write_all(piece).unwrap();
        }
        String::from_utf8(shown).unwrap()
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        let hostile = "title\u{1b}]0;pwned\u{7}clear\u{1b}[2J\u{1b}[H\rback\u{7f}";
        assert_eq!(
            through(&[hostile.as_bytes()]),
            "title^[]0;pwned^Gclear^[[2J^[[H^Mback^?"
        );
    }

    #[test]
    fn c1_controls_and_bidi_overrides_are_shown() {
        assert_eq!(
            through(&["a\u{9b}2Jb\u{202e}cba\u{2066}".as_bytes()]),
            "a\\u{9b}2Jb\\u{202e}cba\\u{2066}"
        );
    }

    #[test]
    fn text_newlines_and_tabs_pass_as_they_are() {
        let text = "line one\n\tindented — ünïcode ✓ 日本\n";
        assert_eq!(through(&[text.as_bytes()]), text);
    }

    #[test]
    fn a_character_split_across_writes_is_kept_whole() {
        let text = "é\u{9b}✓".as_bytes();
        // Split inside every character.
        for cut in 1..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(through(&[a, b]), "é\\u{9b}✓", "cut at {cut}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_bytes() {
        assert_eq!(through(&[b"a\xffb\x1b"]), "a\\xffb^[");
    }
}
