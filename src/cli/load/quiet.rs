//! Waiting for a quiet machine before each design's measured run, when designs are compared
//! (`--baseline`).
//!
//! The designs run one after another, turnstile first. Whatever starts alongside the command
//! competes with the first design only: a pipeline's reader started with it (`… --json | python3
//! -c …` spends about 0.1 s of CPU starting up, as long as turnstile's whole run of 40,000 echo
//! turns on two cores) took a quarter of the machine from turnstile's run and none from the
//! baselines', and the ratio between them read 0.48 where the same runs written to a file read
//! 0.64. So before its run each design waits until the machine has been quiet for one window,
//! for at most a bound, and then runs whatever the machine does.
//!
//! Linux only (`/proc/stat`); elsewhere nothing is waited for.

use std::future::Future;
use std::time::Duration;

/// How long one look at the machine lasts. `/proc/stat` counts in clock ticks (100 per second
/// per CPU), so a window much shorter would count too few to tell.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The busiest a window may be and still count as quiet: a share of all CPUs' time.
pub const QUIET_SHARE: f64 = 0.25;

/// How long a design waits for a quiet window at most before it runs anyway.
pub const MOST: Duration = Duration::from_secs(1);

/// The time all CPUs spent busy, and in all, since boot, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticks {
    /// Ticks spent running anything (user, system, interrupts, stolen by the hypervisor).
    pub busy: u64,
    /// All ticks, idle ones included.
    pub total: u64,
}

/// Reads the machine's [`Ticks`] from `/proc/stat`; `None` where it cannot.
pub fn machine_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(stat.lines().next()?)
}

/// The `cpu` line of `/proc/stat`: `cpu user nice system idle iowait irq softirq steal …`.
/// Idle and iowait are idle; the rest up to steal is busy (guest time is already in user).
fn parse_cpu_line(line: &str) -> Option<Ticks> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let values: Vec<u64> = fields
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = values[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some(Ticks {
        busy,
        total: busy + idle + iowait,
    })
}

/// Whether the machine was quiet between two readings.
fn quiet(before: Ticks, after: Ticks) -> bool {
    let total = after.total.saturating_sub(before.total);
    let busy = after.busy.saturating_sub(before.busy);
    // No tick counted (a clock that did not move): nothing says the machine is busy.
    total == 0 || (busy as f64) <= QUIET_SHARE * total as f64
}

/// What the wait came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// A quiet window ended after this long.
    Quiet(Duration),
    /// No window was quiet within the bound.
    Busy,
    /// The machine's CPU time cannot be read here.
    Unknown,
}

/// Waits until a window of `window` was quiet, or `most` has passed.
///
/// `read` gives the machine's ticks now; `pause` waits one window. They are parameters so that
/// the decision can be tested apart from the machine and the clock.
pub async fn wait_for_quiet<R, P, F>(
    mut read: R,
    mut pause: P,
    window: Duration,
    most: Duration,
) -> Settled
where
    R: FnMut() -> Option<Ticks>,
    P: FnMut(Duration) -> F,
    F: Future<Output = ()>,
{
    let Some(mut before) = read() else {
        return Settled::Unknown;
    };
    let mut waited = Duration::ZERO;
    while waited < most {
        pause(window).await;
        waited += window;
        let Some(after) = read() else {
            return Settled::Unknown;
        };
        if quiet(before, after) {
            return Settled::Quiet(waited);
        }
        before = after;
    }
    Settled::Busy
}

/// Waits for a quiet machine before a design's run (see the module docs), and says so in the
/// log when none came.
pub async fn settle(design: &str) {
    let settled = wait_for_quiet(machine_ticks, tokio::time::sleep, WINDOW, MOST).await;
    match settled {
        Settled::Busy => tracing::warn!(
            design,
            "the machine stayed busy for {MOST:?} before this design's run; measuring anyway"
        ),
        other => tracing::debug!(design, ?other, "settled before the run"),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[test]
    fn the_cpu_line_counts_idle_and_iowait_as_idle() {
        let ticks = parse_cpu_line("cpu  100 5 20 800 10 1 2 3 0 0").unwrap();
        assert_eq!(
            ticks,
            Ticks {
                busy: 131,
                total: 941
            }
        );
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 x 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 3"), None);
    }

    /// Readings that advance by `busy` of 20 ticks per window, one window after another.
    fn readings(busy_per_window: &[u64]) -> impl FnMut() -> Option<Ticks> + '_ {
        let mut at = Ticks { busy: 0, total: 0 };
        let mut windows = busy_per_window.iter().copied();
        let mut first = true;
        move || {
            if !std::mem::take(&mut first) {
                let busy = windows.next().unwrap_or(0);
                at = Ticks {
                    busy: at.busy + busy,
                    total: at.total + 20,
                };
            }
            Some(at)
        }
    }

    async fn run(busy_per_window: &[u64]) -> (Settled, usize) {
        let pauses = RefCell::new(0);
        let settled = wait_for_quiet(
            readings(busy_per_window),
            |_| {
                *pauses.borrow_mut() += 1;
                std::future::ready(())
            },
            WINDOW,
            MOST,
        )
        .await;
        (settled, pauses.into_inner())
    }

    #[tokio::test]
    async fn a_quiet_machine_is_waited_for_one_window() {
        assert_eq!(run(&[2]).await, (Settled::Quiet(WINDOW), 1));
    }

    #[tokio::test]
    async fn a_busy_start_is_waited_out() {
        // A pipeline's reader starting: one CPU of two busy for two windows, then quiet.
        assert_eq!(run(&[10, 10, 3]).await, (Settled::Quiet(WINDOW * 3), 3));
    }

    #[tokio::test]
    async fn a_machine_that_stays_busy_is_measured_after_the_bound() {
        let windows = usize::try_from(MOST.as_millis() / WINDOW.as_millis()).unwrap();
        assert_eq!(run(&[20; 100]).await, (Settled::Busy, windows));
    }

    #[tokio::test]
    async fn no_reading_means_no_wait() {
        let settled = wait_for_quiet(|| None, |_| std::future::ready(()), WINDOW, MOST).await;
        assert_eq!(settled, Settled::Unknown);
    }
}
