//! What the process uses: its resident memory, read from `/proc/self/status` (sampled by the
//! driver while a run goes on), and its CPU time; both are reported with the run's figures.

/// A `kB` field of `/proc/self/status`, in bytes (0 where unavailable: the figures that use it
/// then read 0 rather than failing the run).
fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The process's resident set size now.
pub fn rss_bytes() -> u64 {
    status_field("VmRSS:")
}

/// The process's peak resident set size.
pub fn peak_rss_bytes() -> u64 {
    status_field("VmHWM:")
}

/// The CPU time the whole process has used so far: every thread, those that ended included.
/// (Zero if the clock cannot be read: the figures that use it then read 0 rather than failing
/// the run.)
pub fn cpu_time() -> std::time::Duration {
    clock(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

/// What clock `id` reads now, as a duration (zero if it cannot be read).
fn clock(id: nix::time::ClockId) -> std::time::Duration {
    nix::time::clock_gettime(id).map_or(std::time::Duration::ZERO, std::time::Duration::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Touching 64 MiB raises RSS by about that much, and the peak covers it while it is held:
    /// a reading without the kB factor, or of the wrong field, fails here. (Linux updates the
    /// peak lazily, so after the memory is freed it may not remember it: hence the report also
    /// takes the sampled RSS into its peak.)
    #[test]
    fn rss_follows_allocations_and_the_peak_covers_them() {
        if !cfg!(target_os = "linux") {
            return;
        }
        const SIZE: u64 = 64 << 20;
        /// Other tests of this binary run at the same time and may free a little meanwhile.
        const SLACK: u64 = 8 << 20;
        let before = rss_bytes();
        let block = std::hint::black_box(vec![1u8; SIZE as usize]);
        let during = rss_bytes();
        let peak = peak_rss_bytes();
        assert!(
            during >= before + SIZE / 2,
            "RSS {before} -> {during} after touching {SIZE} bytes"
        );
        assert!(peak + SLACK >= during, "peak {peak} below the RSS {during}");
        drop(block);
    }

    /// The CPU time counts every thread, one that has ended included: a figure read from the
    /// calling thread's clock alone, or missing ended threads, fails here.
    #[test]
    fn cpu_time_counts_a_thread_that_has_ended() {
        const WORK: std::time::Duration = std::time::Duration::from_millis(30);
        let before = cpu_time();
        std::thread::spawn(|| {
            let mut x = 0u64;
            // Read directly, so that a clock that cannot be read fails here instead of
            // reading zero for ever.
            let own = || {
                std::time::Duration::from(
                    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
                        .expect("the thread's CPU clock"),
                )
            };
            while own() < WORK {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        })
        .join()
        .unwrap();
        let used = cpu_time() - before;
        assert!(used >= WORK, "{used:?} counted for {WORK:?} of work");
    }
}
