//! `turnstile load`'s flags checked together: combinations that cannot mean anything, and runs
//! too large to verify, are refused before anything runs.

use super::ledger::MAX_LEDGER_TURNS;
use super::options::{AgentKind, Api};
use super::{schedule, LoadArgs, MAX_CLUSTER};
use turnstile::OverlapPolicy;

/// Refuses flag combinations that cannot mean anything, and runs too large to verify.
pub(super) fn check(args: &LoadArgs) -> Result<(), String> {
    if args.sessions == 0 || args.turns == 0 || args.concurrency == 0 || args.burst == 0 {
        return Err("--sessions, --turns, --concurrency and --burst must be at least 1".into());
    }
    let total = args.sessions.checked_mul(args.turns);
    if total.is_none_or(|t| t > MAX_LEDGER_TURNS) {
        return Err(format!(
            "--sessions × --turns is too large: a run may have at most {MAX_LEDGER_TURNS} turns \
             (the verification keeps 4 bytes per turn in memory); run fewer sessions or turns, \
             or several runs"
        ));
    }
    if args.api == Api::Openai && args.policy != OverlapPolicy::Queue {
        return Err(
            "--api openai takes --policy queue only: a response carries no overlap policy, so \
             the server's own (`serve --policy`) decides"
                .into(),
        );
    }
    if let Some(n) = args.cluster {
        if n == 0 || n > MAX_CLUSTER {
            return Err(format!("--cluster must be between 1 and {MAX_CLUSTER}"));
        }
        if args.burst > 1
            || args.interrupt_rate.0 > 0.0
            || !args.baseline.is_empty()
            || args.stream
            || schedule(args).is_some()
        {
            return Err(
                "--cluster runs with --burst 1, and without --interrupt-rate, --baseline, \
                 --stream, --rate or --rate-curve"
                    .into(),
            );
        }
    }
    if schedule(args).is_some() && (args.burst > 1 || !args.baseline.is_empty()) {
        return Err(
            "--rate and --rate-curve send single turns: use --burst 1, and no --baseline".into(),
        );
    }
    if args.interrupt_rate.0 > 0.0 {
        if args.agent != AgentKind::Mock || args.latency.max.is_zero() {
            return Err(
                "--interrupt-rate needs turns that take time to interrupt: use the \
                        mock agent with a latency, e.g. --latency 20"
                    .into(),
            );
        }
        if args.chunks < 2 {
            return Err(
                "--interrupt-rate interrupts a turn when it streams its first chunk, \
                        so it needs --chunks 2 or more"
                    .into(),
            );
        }
    }
    Ok(())
}
