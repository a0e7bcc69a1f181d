//! What this disk can do for a store that acknowledges an append only once it is flushed: the
//! physical ceiling the file store's figures are read against (see `docs/BENCHMARKS.md`).
//!
//! Each line appends 200-byte records for a fixed time and prints appends per second:
//!
//! - `one file, flush each`: one thread, `fdatasync` after every append;
//! - `N files, N threads, flush each`: N threads, each on its own file, flushing every append;
//! - `one file, flush each, over zeroed room`: as the first line, but each record is written
//!   over zeros the file already holds (the file grown 256 KiB at a time, as the file store's
//!   journal grows its segments), so that a flush writes data alone, never the file's size;
//! - `one file, flush per B`: one thread, one `fdatasync` covering B appends (group commit into
//!   one journal);
//! - `B files, flush each file per round`: one thread writes one append to each of B files, then
//!   `fdatasync`s each (group commit over per-session files).
//!
//! Run: `cargo bench --bench disk_probe` (`PROBE_SECONDS=N` for a longer run; `PROBE_DIR` for
//! the folder to probe, default the system temp folder).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RECORD: [u8; 200] = [b'x'; 200];

fn open(dir: &Path, name: &str) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("the probe folder is writable")
}

/// Runs `round` until `time` has passed; returns appends per second (`round` returns how many
/// appends it made).
fn rate(time: Duration, mut round: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    let mut appends = 0;
    while start.elapsed() < time {
        appends += round();
    }
    appends as f64 / start.elapsed().as_secs_f64()
}

fn one_file(dir: &Path, time: Duration, batch: u64) -> f64 {
    let mut file = open(dir, &format!("journal-{batch}"));
    rate(time, || {
        for _ in 0..batch {
            file.write_all(&RECORD).expect("write");
        }
        file.sync_data().expect("fdatasync");
        batch
    })
}

/// `one_file(dir, time, 1)` with each record written over zeroed room: whenever a record would
/// pass the end of the file, it is written together with zeros up to the next `ROOM` boundary.
fn over_zeroed_room(dir: &Path, time: Duration) -> f64 {
    use std::os::unix::fs::FileExt;
    const ROOM: u64 = 256 * 1024;
    // Not `open`: a positioned write to a file opened for appending lands at its end on Linux.
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(dir.join("journal-room"))
        .expect("the probe folder is writable");
    let (mut at, mut end) = (0u64, 0u64);
    let mut grown = RECORD.to_vec();
    rate(time, || {
        let next = at + RECORD.len() as u64;
        if next > end {
            end = next.next_multiple_of(ROOM);
            grown.resize((end - at) as usize, 0);
            file.write_all_at(&grown, at).expect("write");
            grown.truncate(RECORD.len());
        } else {
            file.write_all_at(&RECORD, at).expect("write");
        }
        file.sync_data().expect("fdatasync");
        at = next;
        1
    })
}

fn many_threads(dir: &Path, time: Duration, threads: usize) -> f64 {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let dir = dir.to_owned();
                scope.spawn(move || {
                    let mut file = open(&dir, &format!("thread-{threads}-{t}"));
                    let start = Instant::now();
                    let mut appends = 0u64;
                    while start.elapsed() < time {
                        file.write_all(&RECORD).expect("write");
                        file.sync_data().expect("fdatasync");
                        appends += 1;
                    }
                    appends as f64 / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("probe thread"))
            .sum()
    })
}

fn many_files(dir: &Path, time: Duration, files: usize) -> f64 {
    let mut open_files: Vec<File> = (0..files)
        .map(|i| open(dir, &format!("session-{files}-{i}")))
        .collect();
    rate(time, || {
        for file in &mut open_files {
            file.write_all(&RECORD).expect("write");
        }
        for file in &open_files {
            file.sync_data().expect("fdatasync");
        }
        files as u64
    })
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let seconds: u64 = std::env::var("PROBE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let time = Duration::from_secs(seconds);
    let base: PathBuf = std::env::var_os("PROBE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("turnstile-disk-probe")
        .tempdir_in(&base)
        .expect("a temp folder for the probe");
    let dir = dir.path();
    println!("disk probe in {} ({seconds} s a line)", base.display());
    println!(
        "{:<44} {:>12.0} appends/s",
        "one file, flush each",
        one_file(dir, time, 1)
    );
    println!(
        "{:<44} {:>12.0} appends/s",
        "one file, flush each, over zeroed room",
        over_zeroed_room(dir, time)
    );
    for threads in [8, 64] {
        let label = format!("{threads} files, {threads} threads, flush each");
        println!(
            "{label:<44} {:>12.0} appends/s",
            many_threads(dir, time, threads)
        );
    }
    for batch in [8, 32, 128] {
        let label = format!("one file, flush per {batch}");
        println!("{label:<44} {:>12.0} appends/s", one_file(dir, time, batch));
    }
    for files in [8, 32, 128] {
        let label = format!("{files} files, flush each file per round");
        println!(
            "{label:<44} {:>12.0} appends/s",
            many_files(dir, time, files)
        );
    }
}
