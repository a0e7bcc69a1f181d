//! A small reader of server-sent events, as `turnstile serve` writes them (read by
//! `load --target` and `chat --url`): `event:` and `data:` lines, events separated by a blank
//! line, `:` comment lines as keep-alives.

/// Longest event accepted: a turn's `outcome` event carries the whole reply, and replies far
/// past a few MiB are not what a load test sends. Past it the turn counts as failed instead of
/// the buffer growing without bound.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One event: its name (`message` when none was given) and its data lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub name: String,
    /// The `data:` fields.
    pub data: String,
}

/// Cuts a byte stream into events; feed it the body's chunks as they come.
#[derive(Debug, Default)]
pub struct SseReader {
    /// Bytes of the event being received (after the last complete line).
    pending: Vec<u8>,
    /// The current event's fields so far.
    name: Option<String>,
    data: Option<String>,
}

impl SseReader {
    /// Takes the next chunk of the body; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        // Lines are read where they lie; the bytes read are dropped once, at the end.
        let mut start = 0;
        while let Some(found) = memchr_newline(&self.pending[start..]) {
            let end = start + found;
            let line = &self.pending[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = String::from_utf8_lossy(line);
            if let Some(event) = line_of(&mut self.name, &mut self.data, &line) {
                events.push(event);
            }
            start = end + 1;
        }
        self.pending.drain(..start);
        let held = self.pending.len()
            + self.data.as_ref().map_or(0, String::len)
            + self.name.as_ref().map_or(0, String::len);
        if held > MAX_EVENT_BYTES {
            return Err(format!(
                "a server-sent event is larger than {MAX_EVENT_BYTES} bytes"
            ));
        }
        Ok(events)
    }
}

/// Where the next line break is.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// One line of the event whose fields are `name` and `data` so far; a blank line ends it.
fn line_of(name: &mut Option<String>, data: &mut Option<String>, line: &str) -> Option<SseEvent> {
    if line.is_empty() {
        let data = data.take();
        let name = name.take();
        return data.map(|data| SseEvent {
            name: name.unwrap_or_else(|| "message".to_owned()),
            data,
        });
    }
    if line.starts_with(':') {
        return None;
    }
    let (field, value) = line.split_once(':').unwrap_or((line, ""));
    let value = value.strip_prefix(' ').unwrap_or(value);
    match field {
        "event" => *name = Some(value.to_owned()),
        "data" => match data {
            Some(data) => {
                data.push('\n');
                data.push_str(value);
            }
            None => *data = Some(value.to_owned()),
        },
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_at_blank_lines_whatever_the_chunking() {
        let body = b": keep-alive\n\nevent: chunk\ndata: {\"text\":\"a\"}\n\n\
                     event: outcome\r\ndata: {\"seq\":2}\r\n\r\n";
        let expected = vec![
            SseEvent {
                name: "chunk".into(),
                data: "{\"text\":\"a\"}".into(),
            },
            SseEvent {
                name: "outcome".into(),
                data: "{\"seq\":2}".into(),
            },
        ];
        for size in [1, 3, 7, body.len()] {
            let mut reader = SseReader::default();
            let mut events = Vec::new();
            for chunk in body.chunks(size) {
                events.extend(reader.push(chunk).unwrap());
            }
            assert_eq!(events, expected, "chunks of {size}");
        }
    }

    #[test]
    fn data_lines_join_and_an_unnamed_event_is_a_message() {
        let mut reader = SseReader::default();
        let events = reader.push(b"data: a\ndata:b\n\n").unwrap();
        assert_eq!(
            events,
            [SseEvent {
                name: "message".into(),
                data: "a\nb".into()
            }]
        );
    }

    #[test]
    fn an_endless_event_is_refused() {
        let mut reader = SseReader::default();
        let line = vec![b'x'; 1024 * 1024];
        let mut refused = false;
        for _ in 0..20 {
            if reader.push(&line).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }
}
