//! `--ack-log FILE`: one line `KEY SEQ` per acknowledged turn, written as it is acknowledged.
//!
//! Each line goes to the operating system with one `write` before the caller moves on, so a
//! `kill -9` of the process loses no line of a turn it had acknowledged (the kernel keeps what
//! was written; surviving a power cut is not the point of this log). A test can then reopen the
//! store and check every logged turn is there.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use parking_lot::Mutex;
use turnstile::SessionKey;

/// An append-only log of acknowledgements, shared by every caller.
pub struct AckLog {
    /// Held only for one `write` call; never across an await.
    file: Mutex<File>,
}

impl AckLog {
    /// Opens (creating or appending to) the log.
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the ack log {}: {e}", path.display()))?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Appends `KEY SEQ` (the key in its canonical `user/session` form, which has no spaces in
    /// load runs). A failed write is reported once per call but does not stop the run.
    pub fn record(&self, key: &SessionKey, seq: u64) {
        let line = format!("{key} {seq}\n");
        // One write of the whole line: with O_APPEND, lines from concurrent callers never
        // interleave.
        if let Err(err) = self.file.lock().write_all(line.as_bytes()) {
            tracing::warn!(%err, "could not write to the ack log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_acknowledgement_is_one_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        let log = AckLog::open(&path).unwrap();
        let key = SessionKey::new("u1", "load-1").unwrap();
        log.record(&key, 2);
        log.record(&key, 4);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "u1/load-1 2\nu1/load-1 4\n");
    }
}
