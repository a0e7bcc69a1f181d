//! Small pure helpers for `turnstile sessions`: durations given on the command line and times
//! and texts shown to the operator.

use std::str::FromStr;
use std::time::Duration;

use turnstile::state::{Event, EventKind};

/// A duration written like `30d`, `12h`, `15m` or `90s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("bad duration {s:?}; expected a number and a unit: 30d, 12h, 15m or 90s");
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (number, unit) = s.split_at(split);
        let n: u64 = number.parse().map_err(|_| bad())?;
        let seconds = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            _ => return Err(bad()),
        };
        n.checked_mul(seconds)
            .map(|secs| Self(Duration::from_secs(secs)))
            .ok_or_else(bad)
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS` in UTC.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1_000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) date; Howard Hinnant's algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// What `show` prints for an event: its text, or for a tool call the tool, its MCP server and
/// its arguments, and for a result its status, duration and value.
pub fn event_text(event: &Event) -> String {
    match &event.kind {
        EventKind::ToolCall {
            name,
            arguments,
            server,
            ..
        } => match server {
            Some(server) => format!("{name} on {server} {arguments}"),
            None => format!("{name} {arguments}"),
        },
        EventKind::ToolResult {
            result,
            status,
            duration_ms,
            ..
        } => {
            let status = format!("{status:?}").to_lowercase();
            let value = match &**result {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            match duration_ms {
                Some(ms) => format!("{status} in {ms} ms: {value}"),
                None => format!("{status}: {value}"),
            }
        }
        _ => event.text().unwrap_or("").to_owned(),
    }
}

/// At most `max` characters of `text` on one line, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit() {
        let secs = |s: &str| s.parse::<HumanDuration>().map(|d| d.0.as_secs());
        assert_eq!(secs("30d"), Ok(30 * 86_400));
        assert_eq!(secs("12h"), Ok(12 * 3_600));
        assert_eq!(secs("15m"), Ok(900));
        assert_eq!(secs("90s"), Ok(90));
        for bad in ["", "30", "d", "3w", "1.5h", "-1d", "99999999999999999999d"] {
            assert!(secs(bad).unwrap_err().contains("30d, 12h"), "{bad}");
        }
    }

    #[test]
    fn times_are_shown_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_767_225_599_000), "2025-12-31 23:59:59");
    }

    #[test]
    fn tool_events_show_their_server_status_and_duration() {
        let call: Event = serde_json::from_value(serde_json::json!({
            "seq": 2, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "author": "agent",
            "at_ms": 1, "kind": {"type": "tool_call", "call_id": "call-1", "name": "echo",
                                 "arguments": {"message": "hi"}, "server": "everything"}
        }))
        .unwrap();
        assert_eq!(event_text(&call), r#"echo on everything {"message":"hi"}"#);
        let result: Event = serde_json::from_value(serde_json::json!({
            "seq": 3, "id": "1b4e28ba-2fa1-11d2-883f-0016d3cca428", "author": "tool",
            "at_ms": 1, "kind": {"type": "tool_result", "call_id": "call-1",
                                 "result": "Echo: hi", "status": "ok", "duration_ms": 12}
        }))
        .unwrap();
        assert_eq!(event_text(&result), "ok in 12 ms: Echo: hi");
    }

    #[test]
    fn long_texts_are_clipped_to_one_line() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdefghijk", 5), "abcd…");
    }
}
