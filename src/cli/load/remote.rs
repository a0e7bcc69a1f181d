//! `turnstile load --target URL[,URL…]`: the workload, ledger and verification of an
//! in-process run, against running `turnstile serve` processes (see `http_target.rs`).
//!
//! Activations and evictions are the servers' own counters (`/metrics`, read before and after
//! the run when the token may read it); other servers' traffic in between counts too.

use std::sync::Arc;

use super::http_target::{HttpOptions, HttpTarget};
use super::options::Targets;
use super::report::Report;
use super::{keys, measure, report, schedule, LoadArgs};

/// What the run takes from the servers' `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// `turnstile_activations_total`.
    pub activations: u64,
    /// `turnstile_evictions_total{reason="idle"}`.
    pub evictions_idle: u64,
    /// `turnstile_evictions_total{reason="lru"}`.
    pub evictions_lru: u64,
}

impl ServerCounters {
    /// Sums the counters of a Prometheus text page; unknown lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut counters = Self::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let value = value as u64;
            if name.starts_with("turnstile_activations_total") {
                counters.activations += value;
            } else if name.starts_with("turnstile_evictions_total") {
                if name.contains("reason=\"idle\"") {
                    counters.evictions_idle += value;
                } else if name.contains("reason=\"lru\"") {
                    counters.evictions_lru += value;
                }
            }
        }
        counters
    }

    fn add(self, other: Self) -> Self {
        Self {
            activations: self.activations + other.activations,
            evictions_idle: self.evictions_idle + other.evictions_idle,
            evictions_lru: self.evictions_lru + other.evictions_lru,
        }
    }
}

/// Runs the workload against `targets` and reads every session back through them.
pub async fn run(args: &LoadArgs, run_id: &str) -> Result<Report, String> {
    let Some(Targets(bases)) = &args.target else {
        return Err("no --target given".into());
    };
    let keys = keys(args, "load", run_id)?;
    let target = Arc::new(HttpTarget::new(HttpOptions {
        bases: bases.clone(),
        spread: args.spread,
        token: args.token.clone(),
        policy: args.policy,
        run_id: run_id.to_owned(),
        ordered: args.burst > 1 || schedule(args).is_some(),
        api: args.api,
    })?);
    target.probe(&keys[0]).await?;
    target.open_conversations(&keys).await?;
    let before = server_counters(&target).await;
    let mut figures = measure(args, target.clone(), keys, target.as_ref(), "remote").await?;
    if let (Some(before), Some(after)) = (before, server_counters(&target).await) {
        figures.activations = after.activations.saturating_sub(before.activations);
        figures.evictions_idle = after.evictions_idle.saturating_sub(before.evictions_idle);
        figures.evictions_lru = after.evictions_lru.saturating_sub(before.evictions_lru);
        figures.evictions = figures.evictions_idle + figures.evictions_lru;
    }
    let mut report = report(
        args,
        run_id,
        "remote (the targets' own)".to_owned(),
        figures,
    );
    report.target = Some(target.bases().to_vec());
    Ok(report)
}

/// Every target's counters summed; `None` when one of them does not show its `/metrics`.
async fn server_counters(target: &HttpTarget) -> Option<ServerCounters> {
    let mut total = ServerCounters::default();
    for base in target.bases() {
        let text = target.metrics(base).await?;
        total = total.add(ServerCounters::parse(&text));
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_counters_are_summed_from_prometheus_text() {
        let text = "# TYPE turnstile_activations_total counter\n\
                    turnstile_activations_total 12\n\
                    turnstile_evictions_total{reason=\"idle\"} 3\n\
                    turnstile_evictions_total{reason=\"lru\"} 4\n\
                    turnstile_live_sessions 9\n\
                    garbage\n";
        assert_eq!(
            ServerCounters::parse(text),
            ServerCounters {
                activations: 12,
                evictions_idle: 3,
                evictions_lru: 4
            }
        );
    }
}
