//! The report as a table, for a person at a terminal (`turnstile load` without `--json`).

use super::{Figures, Report};

impl Report {
    /// Prints the run's figures, one row per design, then what the rows leave out.
    pub(super) fn print_table(&self) {
        println!(
            "turnstile load: {} sessions × {} turns, {} callers, bursts of {}, think {} ms, {} agent \
             {} ms × {} chunks, policy {}, store {} (run {})",
            self.sessions,
            self.turns_per_session,
            self.concurrency,
            self.burst,
            self.think_ms,
            self.agent,
            self.latency_ms,
            self.chunks,
            self.policy,
            self.store,
            self.run_id
        );
        println!(
            "{:<11} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>16} {:>9} {:>10} {:>9}",
            "design",
            "turns/s",
            "p50 µs",
            "p90 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "ok",
            "failed",
            "lost/dup/reord",
            "peak live",
            "B/session",
            "peak RSS"
        );
        row("turnstile", &self.figures);
        for (name, baseline) in &self.baseline {
            if let Some(figures) = &baseline.figures {
                row(name, figures);
            }
        }
        let f = &self.figures;
        if let Some(offered) = f.offered_rate {
            println!(
                "open loop: offered {offered:.0} turns/s, achieved {:.0} turns/s (latency from each turn's due time)",
                f.achieved_rate
            );
            for step in &f.steps {
                println!(
                    "  step {:>8.0}/s: sent {:>8}, achieved {:>8.0}/s, p50 {} µs, p99 {} µs",
                    step.offered_rate,
                    step.sent,
                    step.achieved_rate,
                    step.latency_us.p50,
                    step.latency_us.p99
                );
            }
            if let Some(rate) = f.max_rate_within_slo {
                println!("  highest rate with p99 within --slo-ms: {rate:.0} turns/s");
            }
        }
        if let Some(t) = &f.ttfc_us {
            println!(
                "time to first chunk: p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs",
                t.p50, t.p90, t.p99, t.p999
            );
        }
        if let Some(target) = &self.target {
            println!("sent over HTTP to {}", target.join(", "));
        }
        if let Some(cluster) = &self.cluster {
            println!(
                "cluster: {} runtimes sharing the sessions; {} turns went on to their session's owner",
                cluster.processes, cluster.forwarded
            );
        }
        let r = &f.failures_by_reason;
        println!(
            "turnstile: activations {}, evictions {} (idle {}, lru {}), interrupts {} \
             ({} turns answered interrupted, {} superseded, {} merged)",
            f.activations,
            f.evictions,
            f.evictions_idle,
            f.evictions_lru,
            f.interrupts,
            f.turns_interrupted,
            f.turns_superseded,
            f.turns_merged
        );
        println!(
            "  rejections {} (busy {}, overloaded {}, at capacity {}, concurrency {}, \
             draining {}); store errors {}, agent errors {}, other {}",
            f.rejections,
            r.busy,
            r.overloaded,
            r.at_capacity,
            r.concurrency_limit,
            r.draining,
            r.store,
            r.agent,
            r.other
        );
        println!(
            "  {:.2}% of turns over the {} µs budget (agent latency + 2 ms)",
            f.share_over_budget * 100.0,
            f.latency_budget_us
        );
        println!(
            "  CPU {:.2} s over {:.2} s, {:.1} µs per acknowledged turn (every thread of the process)",
            f.cpu_sec, f.elapsed_sec, f.cpu_us_per_turn
        );
        for (name, baseline) in &self.baseline {
            match (&baseline.error, baseline.turnstile_throughput_ratio) {
                (Some(error), _) => println!("  baseline {name} FAILED: {error}"),
                (None, Some(ratio)) => {
                    println!("  throughput vs {name}: {:.0}%", ratio * 100.0);
                }
                (None, None) => {}
            }
        }
        let verdict = if self.is_clean() {
            "every acknowledged turn is in the store, once, in order, answered at its seq"
        } else {
            "FAILED: acknowledged turns are missing, duplicated, out of order or misanswered, \
             or a turn answered busy was stored (see the lost/dup/reord, misanswered and \
             busy_but_stored counts in --json)"
        };
        println!("verification: {verdict}");
    }
}

/// One design's row of the table.
fn row(name: &str, f: &Figures) {
    let l = &f.latency_us;
    println!(
        "{:<11} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>16} {:>9} {:>10} {:>9}",
        name,
        f.turns_per_sec,
        l.p50,
        l.p90,
        l.p99,
        l.p999,
        l.max,
        f.turns_ok,
        f.turns_failed,
        format!("{}/{}/{}", f.lost, f.duplicated, f.reordered),
        f.peak_live_sessions,
        f.bytes_per_live_session,
        format!("{:.0} MiB", f.peak_rss_bytes as f64 / 1_048_576.0)
    );
}
