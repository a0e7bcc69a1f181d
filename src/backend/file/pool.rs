//! The file kit's I/O threads: a fixed number, shared by every file-backed family in the process
//! (sessions, artifacts, memory, pairings), so that a burst of callers queues for a thread
//! instead of growing tokio's blocking pool to hundreds of threads (each with its stack and
//! allocator arenas) that then wait on the same disk.
//!
//! Built on a tokio runtime of its own whose blocking pool is capped
//! ([`tokio::runtime::Builder::max_blocking_threads`]): the same well-tested queue and thread
//! management the default blocking pool uses, with a bound. The runtime is never driven (no task
//! runs on it); only its blocking threads work, and a caller on any runtime awaits the result.
//! One difference from `spawn_blocking` on the caller's runtime: a runtime with paused time
//! (`tokio::time::pause`) does not know this work is in flight, and may advance its clock while
//! it runs.

use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable that sets the number of I/O threads (default: twice the number of
/// cores the process may use, at least 2 and at most 16).
pub const IO_THREADS_VAR: &str = "TURNSTILE_FILE_IO_THREADS";

/// Most I/O threads the variable may ask for.
const MAX_IO_THREADS: usize = 64;

/// How long an idle I/O thread lives before it exits (a new one starts on demand).
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// The process's I/O threads; see the module docs.
struct IoPool {
    runtime: tokio::runtime::Runtime,
    threads: usize,
}

static POOL: OnceLock<IoPool> = OnceLock::new();

fn pool() -> &'static IoPool {
    POOL.get_or_init(|| {
        let threads = threads_from(std::env::var(IO_THREADS_VAR).ok().as_deref());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(threads)
            .thread_keep_alive(KEEP_ALIVE)
            .thread_name("turnstile-file-io")
            .build()
            .expect("a runtime with no driver and no I/O builds");
        IoPool { runtime, threads }
    })
}

/// The number of I/O threads for the variable's value (`None` when unset): a bad value is named
/// in a warning and the default used.
fn threads_from(value: Option<&str>) -> usize {
    let default = std::thread::available_parallelism()
        .map_or(2, |n| n.get() * 2)
        .clamp(2, 16);
    match value.map(str::trim) {
        None | Some("") => default,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_IO_THREADS).contains(&n) => n,
            _ => {
                tracing::warn!(
                    variable = IO_THREADS_VAR,
                    value = text,
                    default,
                    "not a number of I/O threads from 1 to {MAX_IO_THREADS}; using the default"
                );
                default
            }
        },
    }
}

/// The number of I/O threads this process uses.
pub fn io_threads() -> usize {
    pool().threads
}

/// Runs blocking file work on an I/O thread and waits for it without blocking the caller's
/// runtime. A panic in `work` is resumed here, as if it had run in place; `Err` says the task
/// did not run to its end (the pool shut down), in words for an error's detail.
pub(crate) async fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    match pool().runtime.spawn_blocking(work).await {
        Ok(value) => Ok(value),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(format!("the I/O task did not run: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_is_read_from_the_variable_and_bounded() {
        let default = threads_from(None);
        assert!((2..=16).contains(&default));
        assert_eq!(threads_from(Some("3")), 3);
        assert_eq!(threads_from(Some(" 5 ")), 5);
        assert_eq!(threads_from(Some("")), default);
        assert_eq!(threads_from(Some("0")), default);
        assert_eq!(threads_from(Some("65")), default);
        assert_eq!(threads_from(Some("many")), default);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_threads_run_work_than_the_pool_has() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..io_threads() * 8)
            .map(|_| {
                let (running, most) = (running.clone(), most.clone());
                tokio::spawn(run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // Hold the thread a little so that work would overlap if it could.
                    std::thread::yield_now();
                    for _ in 0..10_000 {
                        std::hint::spin_loop();
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            (1..=io_threads()).contains(&most),
            "{most} tasks ran at once on {} threads",
            io_threads()
        );
    }
}
