//! Server-sent events as chat-completion streams use them: `data:` lines, a blank line ending
//! each event, and `data: [DONE]` at the end. Only the `data` field matters here; comments and
//! other fields are skipped.

/// The largest event this decoder holds before it calls the stream malformed. A delta is a few
/// tokens, a tool call's arguments in one delta a few KiB, so 256 KiB without a blank line means
/// the server is not speaking SSE. The cap also bounds what parsing one event costs: JSON of
/// tiny objects (`[{},{},…]`, 3 bytes each) becomes some 25–30 times its size in memory, so an
/// event is never more than a few MB once parsed, per session.
pub(super) const MAX_EVENT_BYTES: usize = 256 << 10;

/// Splits a byte stream into the `data` payloads of its events.
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    /// Bytes of the line being received (no newline yet).
    line: Vec<u8>,
    /// `data` lines of the event being received, joined with `\n`.
    data: Option<String>,
}

/// Why a byte stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SseError {
    /// An event grew past [`MAX_EVENT_BYTES`].
    TooLarge,
    /// A line is not UTF-8.
    NotUtf8,
}

impl SseDecoder {
    /// Feeds received bytes; returns the payloads of the events they completed, in order.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        let mut done = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                if self.line.len() + self.data.as_ref().map_or(0, String::len) > MAX_EVENT_BYTES {
                    return Err(SseError::TooLarge);
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
            if line.is_empty() {
                done.extend(self.data.take());
            } else if let Some(value) = field_value(&line, "data") {
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                }
            }
        }
        Ok(done)
    }

    /// The payload of an event the stream ended inside of (no blank line after it), if any.
    pub(super) fn finish(&mut self) -> Option<String> {
        if !self.line.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if let Some(value) = field_value(line.trim_end_matches('\r'), "data") {
                let data = self.data.get_or_insert_with(String::new);
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
        }
        self.data.take()
    }
}

/// The value of `line` if it is the field `name` (`name: value` or `name:value`).
fn field_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_are_joined() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(
            decoder.push(b":1}\r\n\r\ndata:[DONE]\n\n").unwrap(),
            vec!["{\"a\":1}".to_owned(), "[DONE]".to_owned()]
        );
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn comments_and_other_fields_are_skipped_and_data_lines_joined() {
        let mut decoder = SseDecoder::default();
        let events = decoder
            .push(b": keep-alive\n\nevent: message\ndata: a\ndata: b\nid: 7\n\n")
            .unwrap();
        assert_eq!(events, vec!["a\nb".to_owned()]);
    }

    #[test]
    fn an_event_cut_off_by_the_end_of_the_stream_is_handed_back() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: tail").unwrap().is_empty());
        assert_eq!(decoder.finish().as_deref(), Some("tail"));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut decoder = SseDecoder::default();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(decoder.push(&big), Err(SseError::TooLarge));
    }
}
