//! The log's line format: one event per line, the last line of each append carrying the
//! session's new version as a commit marker, with the append's length and CRC-32.
//!
//! Pure: nothing here touches the disk.
//!
//! The marker is spliced in as the object's *first* fields:
//! `{"_v":7,"_len":1234,"_crc":3735928559,"seq":12,…}`. An event serialises its own fields first
//! (`seq` leads) and fields from a newer writer (`extra`) after them, so no event line can start
//! with `{"_v":` by itself — a line that does carries a marker, whatever fields an event holds,
//! and [`decode`] removes it before the event is built. Returned events are therefore exactly
//! what was appended.
//!
//! `_len` and `_crc` describe the append's *plain* lines: its events, one JSON line each, as
//! they would be written without the marker (the marked line then starts with `{"seq"`). A
//! reader that meets a marker knows the append it ends was written whole, and the check tells
//! it whether those bytes are still the ones written. Markers of the first marked format carry
//! only `_v`; they are still read, without a check.

use serde::de::Error as _;

use crate::state::Event;

/// How a line carrying a commit marker starts; the version's digits and a comma follow.
const MARKER_PREFIX: &[u8] = b"{\"_v\":";
/// After the version: the plain length of the append, its digits and a comma follow.
const LEN_FIELD: &[u8] = b"\"_len\":";
/// After the length: the CRC-32 of the plain append, its digits and a comma follow.
const CRC_FIELD: &[u8] = b"\"_crc\":";

/// What a commit marker says about the append its line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Marker {
    /// The session's version once the append is complete.
    pub version: u64,
    /// The append's plain length and CRC-32; `None` in a marker of the first marked format.
    pub check: Option<Check>,
    /// Where the event's own fields start in the marked line (right after the marker).
    pub fields_at: usize,
}

/// The length and CRC-32 of an append's plain lines, as its marker records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Check {
    /// Bytes of the append's plain lines, newlines included.
    pub len: u64,
    /// CRC-32 (IEEE) of those bytes.
    pub crc: u32,
}

/// Accumulates the plain lines of an append as they are read, to compare with its [`Check`].
#[derive(Debug, Default)]
pub(super) struct PlainCheck {
    len: u64,
    hasher: crc32fast::Hasher,
}

impl PlainCheck {
    /// Adds one line as read (`text`, without its newline), and `marker` if it carries one.
    pub(super) fn add(&mut self, text: &[u8], marker: Option<&Marker>) {
        match marker {
            Some(marker) => {
                self.hasher.update(b"{");
                self.hasher.update(&text[marker.fields_at..]);
                self.len += 1 + (text.len() - marker.fields_at) as u64;
            }
            None => {
                self.hasher.update(text);
                self.len += text.len() as u64;
            }
        }
        self.hasher.update(b"\n");
        self.len += 1;
    }

    /// The length and CRC-32 of the lines added so far; the accumulator starts again empty.
    pub(super) fn take(&mut self) -> Check {
        let done = std::mem::take(self);
        Check {
            len: done.len,
            crc: done.hasher.finalize(),
        }
    }
}

/// Serialises one append: each event on its own line, the last one marked with `version`, the
/// session's version once the append is complete, and the plain lines' length and CRC-32.
/// No events, no bytes.
pub(super) fn encode_append(events: &[Event], version: u64) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(events.len() * 512 + 64);
    let mut last_start = 0;
    for event in events {
        last_start = out.len();
        serde_json::to_writer(&mut out, event)?;
        out.push(b'\n');
    }
    if events.is_empty() {
        return Ok(out);
    }
    // An event always serialises as a non-empty object, so its line is `{` followed by at
    // least one field; the marker goes in front of that field.
    if out.get(last_start) != Some(&b'{') || out.get(last_start + 1) == Some(&b'}') {
        return Err(serde_json::Error::custom(
            "an event did not serialise as a non-empty JSON object",
        ));
    }
    let check = Check {
        len: out.len() as u64,
        crc: crc32fast::hash(&out),
    };
    let mut marker = Vec::with_capacity(48);
    marker.extend_from_slice(MARKER_PREFIX);
    marker.extend_from_slice(version.to_string().as_bytes());
    marker.push(b',');
    marker.extend_from_slice(LEN_FIELD);
    marker.extend_from_slice(check.len.to_string().as_bytes());
    marker.push(b',');
    marker.extend_from_slice(CRC_FIELD);
    marker.extend_from_slice(check.crc.to_string().as_bytes());
    marker.push(b',');
    out.splice(last_start..=last_start, marker);
    Ok(out)
}

/// Reads one line (without its newline): the event, and the marker if the line ends an append.
pub(super) fn decode(line: &[u8]) -> Result<(Event, Option<Marker>), serde_json::Error> {
    let Some(marker) = parse_marker(line)? else {
        return Ok((serde_json::from_slice(line)?, None));
    };
    let fields = &line[marker.fields_at..];
    let mut object = Vec::with_capacity(fields.len() + 1);
    object.push(b'{');
    object.extend_from_slice(fields);
    Ok((serde_json::from_slice(&object)?, Some(marker)))
}

/// The marker a line starts with: `None` for a plain line, an error for a malformed marker.
fn parse_marker(line: &[u8]) -> Result<Option<Marker>, serde_json::Error> {
    if !is_marked(line) {
        return Ok(None);
    }
    let malformed = || serde_json::Error::custom("malformed commit marker");
    let mut at = MARKER_PREFIX.len();
    let version = number(line, &mut at).ok_or_else(malformed)?;
    let check = if line[at..].starts_with(LEN_FIELD) {
        at += LEN_FIELD.len();
        let len = number(line, &mut at).ok_or_else(malformed)?;
        if !line[at..].starts_with(CRC_FIELD) {
            return Err(malformed());
        }
        at += CRC_FIELD.len();
        let crc = number(line, &mut at)
            .and_then(|crc| u32::try_from(crc).ok())
            .ok_or_else(malformed)?;
        Some(Check { len, crc })
    } else {
        None
    };
    Ok(Some(Marker {
        version,
        check,
        fields_at: at,
    }))
}

/// Parses the decimal digits at `line[*at..]` followed by a comma, moving `at` past the comma.
fn number(line: &[u8], at: &mut usize) -> Option<u64> {
    let rest = &line[*at..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    let value = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    *at += digits + 1;
    Some(value)
}

/// Whether a line carries a commit marker, judged by its start alone (cheap: used to find
/// acknowledged appends behind an unreadable line).
pub(super) fn is_marked(line: &[u8]) -> bool {
    line.starts_with(MARKER_PREFIX)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::conformance::turn_events;

    fn lines(bytes: &[u8]) -> Vec<&[u8]> {
        bytes
            .strip_suffix(b"\n")
            .unwrap()
            .split(|&b| b == b'\n')
            .collect()
    }

    /// The version a decoded line's marker carries.
    fn version(line: &[u8]) -> Option<u64> {
        decode(line).unwrap().1.map(|m| m.version)
    }

    /// The event a line holds.
    fn event(line: &[u8]) -> Event {
        decode(line).unwrap().0
    }

    #[test]
    fn only_the_last_line_of_an_append_is_marked_and_decoding_strips_it() {
        let events = turn_events(5, "hi", None);
        let bytes = encode_append(&events, 42).unwrap();
        let lines = lines(&bytes);
        assert_eq!(lines.len(), 2);
        assert!(!is_marked(lines[0]) && is_marked(lines[1]));
        assert!(lines[1].starts_with(b"{\"_v\":42,\"_len\":"));
        assert_eq!(
            (event(lines[0]), version(lines[0])),
            (events[0].clone(), None)
        );
        assert_eq!(
            (event(lines[1]), version(lines[1])),
            (events[1].clone(), Some(42))
        );
    }

    #[test]
    fn the_check_covers_the_plain_lines_of_the_append() {
        let events = turn_events(5, "hi", None);
        let bytes = encode_append(&events, 42).unwrap();
        let mut plain = Vec::new();
        for event in &events {
            serde_json::to_writer(&mut plain, event).unwrap();
            plain.push(b'\n');
        }
        let mut check = PlainCheck::default();
        let mut recorded = None;
        for text in lines(&bytes) {
            let (_, marker) = decode(text).unwrap();
            check.add(text, marker.as_ref());
            recorded = marker.and_then(|m| m.check);
        }
        let expected = Check {
            len: plain.len() as u64,
            crc: crc32fast::hash(&plain),
        };
        assert_eq!(recorded, Some(expected));
        assert_eq!(check.take(), expected);
        assert_eq!(check.take().len, 0, "taking starts a new append");
    }

    #[test]
    fn a_changed_byte_fails_the_check_even_when_the_json_stays_valid() {
        let events = turn_events(5, "hello", None);
        let mut bytes = encode_append(&events, 3).unwrap();
        let at = bytes.windows(5).position(|w| w == b"hello").unwrap();
        bytes[at] = b'j';
        let mut check = PlainCheck::default();
        let mut recorded = None;
        for text in lines(&bytes) {
            let (_, marker) = decode(text).expect("still valid JSON");
            check.add(text, marker.as_ref());
            recorded = marker.and_then(|m| m.check);
        }
        assert_ne!(Some(check.take()), recorded);
    }

    #[test]
    fn markers_of_the_first_marked_format_still_decode_without_a_check() {
        let event = &turn_events(1, "v1", None)[1];
        let body = serde_json::to_vec(event).unwrap();
        let mut line = b"{\"_v\":9,".to_vec();
        line.extend_from_slice(&body[1..]);
        let (decoded, marker) = decode(&line).unwrap();
        assert_eq!(&decoded, event);
        let marker = marker.unwrap();
        assert_eq!((marker.version, marker.check), (9, None));
    }

    #[test]
    fn no_events_encode_to_no_bytes() {
        assert!(encode_append(&[], 5).unwrap().is_empty());
    }

    #[test]
    fn an_event_field_named_like_the_marker_is_kept_as_data() {
        let mut events = turn_events(1, "x", None);
        for event in &mut events {
            event.extra.insert("_v".to_owned(), json!(7));
        }
        let bytes = encode_append(&events, 3).unwrap();
        let lines = lines(&bytes);
        assert!(
            !is_marked(lines[0]),
            "a field from a newer writer never leads the line"
        );
        assert_eq!(
            (event(lines[0]), version(lines[0])),
            (events[0].clone(), None)
        );
        assert_eq!(
            (event(lines[1]), version(lines[1])),
            (events[1].clone(), Some(3))
        );
    }

    #[test]
    fn unmarked_lines_of_the_old_format_still_decode() {
        let event = &turn_events(1, "old", None)[0];
        let line = serde_json::to_vec(event).unwrap();
        assert_eq!((self::event(&line), version(&line)), (event.clone(), None));
    }

    #[test]
    fn malformed_markers_are_errors() {
        for line in [
            &b"{\"_v\":,\"seq\":1}"[..],
            b"{\"_v\":12}",
            b"{\"_v\":99999999999999999999,\"seq\":1}",
            b"{\"_v\":1,",
            b"{\"_v\":1,\"_len\":5,\"seq\":1}",
            b"{\"_v\":1,\"_len\":5,\"_crc\":4294967296,\"seq\":1}",
        ] {
            assert!(decode(line).is_err(), "{}", String::from_utf8_lossy(line));
        }
    }
}
