//! The log's line format: one event per line, the last line of each append carrying the
//! session's new version as a commit marker.
//!
//! Pure: nothing here touches the disk.
//!
//! The marker is spliced in as the object's *first* field: `{"_v":7,"seq":12,…}`. An event
//! serialises its own fields first (`seq` leads) and fields from a newer writer (`extra`) after
//! them, so no event line can start with `{"_v":` by itself — a line that does carries a marker,
//! whatever fields an event holds, and [`decode`] removes it before the event is built. Returned
//! events are therefore exactly what was appended.

use serde::de::Error as _;

use crate::state::Event;

/// How a line carrying a commit marker starts; the version's digits and a comma follow.
const MARKER_PREFIX: &[u8] = b"{\"_v\":";

/// Serialises one append: each event on its own line, the last one marked with `version`, the
/// session's version once the append is complete.
pub(super) fn encode_append(events: &[Event], version: u64) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(events.len() * 512);
    let Some((last, rest)) = events.split_last() else {
        return Ok(out);
    };
    for event in rest {
        serde_json::to_writer(&mut out, event)?;
        out.push(b'\n');
    }
    let body = serde_json::to_vec(last)?;
    // An event always serialises as a non-empty object, so `body` is `{` followed by at least
    // one field; the marker goes in front of that field.
    let fields = body
        .strip_prefix(b"{")
        .ok_or_else(|| serde_json::Error::custom("an event did not serialise as a JSON object"))?;
    out.extend_from_slice(MARKER_PREFIX);
    out.extend_from_slice(version.to_string().as_bytes());
    out.push(b',');
    out.extend_from_slice(fields);
    out.push(b'\n');
    Ok(out)
}

/// Reads one line (without its newline): the event, and the version its marker carries if the
/// line ends an append.
pub(super) fn decode(line: &[u8]) -> Result<(Event, Option<u64>), serde_json::Error> {
    let Some(rest) = line.strip_prefix(MARKER_PREFIX) else {
        return Ok((serde_json::from_slice(line)?, None));
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let version = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|_| rest.get(digits) == Some(&b','))
        .ok_or_else(|| serde_json::Error::custom("malformed commit marker"))?;
    let mut object = Vec::with_capacity(rest.len() - digits);
    object.push(b'{');
    object.extend_from_slice(&rest[digits + 1..]);
    Ok((serde_json::from_slice(&object)?, Some(version)))
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

    #[test]
    fn only_the_last_line_of_an_append_is_marked_and_decoding_strips_it() {
        let events = turn_events(5, "hi", None);
        let bytes = encode_append(&events, 42).unwrap();
        let lines = lines(&bytes);
        assert_eq!(lines.len(), 2);
        assert!(!is_marked(lines[0]) && is_marked(lines[1]));
        assert!(lines[1].starts_with(b"{\"_v\":42,\"seq\":6,"));
        assert_eq!(decode(lines[0]).unwrap(), (events[0].clone(), None));
        assert_eq!(decode(lines[1]).unwrap(), (events[1].clone(), Some(42)));
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
        assert_eq!(decode(lines[0]).unwrap(), (events[0].clone(), None));
        assert_eq!(decode(lines[1]).unwrap(), (events[1].clone(), Some(3)));
    }

    #[test]
    fn unmarked_lines_of_the_old_format_still_decode() {
        let event = &turn_events(1, "old", None)[0];
        let line = serde_json::to_vec(event).unwrap();
        assert_eq!(decode(&line).unwrap(), (event.clone(), None));
    }

    #[test]
    fn malformed_markers_are_errors() {
        for line in [
            &b"{\"_v\":,\"seq\":1}"[..],
            b"{\"_v\":12}",
            b"{\"_v\":99999999999999999999,\"seq\":1}",
            b"{\"_v\":1,",
        ] {
            assert!(decode(line).is_err(), "{}", String::from_utf8_lossy(line));
        }
    }
}
