//! Waiting for a quiet machine before each design's measured run, when designs are compared
//! (`--baseline`).
//!
//! The designs run one after another, turnstile first, so whatever starts alongside the command
//! competes with the first design only: a pipeline's reader started with it (`… --json | python3
//! -c …` spends about 0.1 s of CPU starting up) takes its share of the machine from turnstile's
//! run and none from the baselines'. So before its run each design waits until the CPUs it may
//! run on have been quiet for one window, for at most a bound, and then runs whatever the
//! machine does (see `docs/load.md`, "Baselines").
//!
//! Linux only (`/proc/stat`); elsewhere nothing is waited for. A container limited by a CPU
//! quota rather than a CPU set sees the whole host's CPUs.

use std::future::Future;
use std::time::Duration;

use crate::cli::{say, Said};

/// How long one look at the machine lasts. `/proc/stat` counts in clock ticks (100 per second
/// per CPU), so a window much shorter would count too few to tell.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The busiest a window may be and still count as quiet, as a share of the CPUs' time: high
/// enough for a machine's usual background (a daemon's tick, the ±1 tick of the counting), low
/// enough that one CPU of two kept busy by another process is not quiet.
pub const QUIET_SHARE: f64 = 0.25;

/// How long a design waits for a quiet window at most before it runs anyway: ten windows, long
/// enough for a process started with the command to finish starting, short enough not to hold a
/// comparison on a machine that is busy for good.
pub const MOST: Duration = Duration::from_secs(1);

/// The time CPUs spent busy, and in all, since boot, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ticks {
    /// Ticks spent running anything (user, system, interrupts, stolen by the hypervisor).
    pub busy: u64,
    /// All ticks, idle ones included.
    pub total: u64,
}

/// Reads the [`Ticks`] of the CPUs this process may run on (all of them where its affinity
/// cannot be read) from `/proc/stat`; `None` where it cannot.
pub fn machine_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    ticks_of(&stat, allowed_cpus().as_deref())
}

/// The CPUs this process may run on, where known.
fn allowed_cpus() -> Option<Vec<usize>> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    Some(
        (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect(),
    )
}

/// The ticks of `/proc/stat`'s lines for the CPUs in `allowed`, summed; the all-CPUs `cpu` line
/// when `allowed` is `None` or names no CPU the file lists.
fn ticks_of(stat: &str, allowed: Option<&[usize]>) -> Option<Ticks> {
    let mut all = None;
    let mut mine: Option<Ticks> = None;
    for line in stat.lines().take_while(|l| l.starts_with("cpu")) {
        let (cpu, ticks) = parse_cpu_line(line)?;
        match cpu {
            None => all = Some(ticks),
            Some(cpu) if allowed.is_some_and(|allowed| allowed.contains(&cpu)) => {
                let sum = mine.get_or_insert_with(Ticks::default);
                sum.busy += ticks.busy;
                sum.total += ticks.total;
            }
            Some(_) => {}
        }
    }
    mine.or(all)
}

/// One CPU line of `/proc/stat`: `cpu` (all CPUs) or `cpuN`, then `user nice system idle iowait
/// irq softirq steal …`. Idle and iowait are idle; the rest up to steal is busy (guest time is
/// already in user).
fn parse_cpu_line(line: &str) -> Option<(Option<usize>, Ticks)> {
    let mut fields = line.split_whitespace();
    let cpu = match fields.next()?.strip_prefix("cpu")? {
        "" => None,
        number => Some(number.parse().ok()?),
    };
    let values: Vec<u64> = fields
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = values[..] else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some((
        cpu,
        Ticks {
            busy,
            total: busy + idle + iowait,
        },
    ))
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

/// Waits for a quiet machine before a design's run (see the module docs); says so on stderr,
/// whatever `RUST_LOG` says, when none came.
pub async fn settle(design: &str) {
    let settled = wait_for_quiet(machine_ticks, tokio::time::sleep, WINDOW, MOST).await;
    if settled == Settled::Busy {
        say(
            Said::Warn,
            &format!(
                "turnstile load: the machine stayed busy for {MOST:?} before {design}'s run; \
                 measuring anyway (for figures comparable between designs, run the comparison \
                 on a machine with nothing else running)"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[test]
    fn the_cpu_line_counts_idle_and_iowait_as_idle() {
        let ticks = |busy, total| Ticks { busy, total };
        assert_eq!(
            parse_cpu_line("cpu  100 5 20 800 10 1 2 3 0 0"),
            Some((None, ticks(131, 941)))
        );
        assert_eq!(
            parse_cpu_line("cpu7 1 2 3 4 5 6 7 8"),
            Some((Some(7), ticks(27, 36)))
        );
        assert_eq!(parse_cpu_line("cpu 1 2 x 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("cpu 1 2 3"), None);
        assert_eq!(parse_cpu_line("cpux 1 2 3 4 5 6 7 8"), None);
        assert_eq!(parse_cpu_line("intr 1 2 3 4 5 6 7 8"), None);
    }

    #[test]
    fn only_the_cpus_this_process_may_use_are_counted() {
        let stat = "cpu  30 0 0 70 0 0 0 0\n\
                    cpu0 20 0 0 30 0 0 0 0\n\
                    cpu1 0 0 0 40 0 0 0 0\n\
                    cpu2 10 0 0 0 0 0 0 0\n\
                    intr 1 2 3\n";
        let ticks = |busy, total| Some(Ticks { busy, total });
        assert_eq!(ticks_of(stat, None), ticks(30, 100));
        assert_eq!(ticks_of(stat, Some(&[1])), ticks(0, 40));
        assert_eq!(ticks_of(stat, Some(&[0, 2])), ticks(30, 60));
        // A set naming no CPU the file lists: the whole machine.
        assert_eq!(ticks_of(stat, Some(&[9])), ticks(30, 100));
        assert_eq!(ticks_of("cpu 1 2\n", None), None);
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
