//! Holding a finished turn's state writes against the declared state keys.

use super::Live;
use crate::agent::{AgentFailure, FailureKind, TurnRecord};
use crate::session::task::TaskResult;
use crate::state_keys::Mode;

impl Live {
    /// In `strict` mode, a turn whose delta writes an undeclared or mistyped key becomes a
    /// failed turn naming the key(s), so that none of its output, tool events or writes are
    /// stored (only its inputs and the failure). In `warn` mode the writes are logged (and
    /// counted by the registry) and the turn stands. A failed turn is left as it is: it stores
    /// no writes anyway.
    pub(super) fn check_state_keys(&self, result: TaskResult, record: &TurnRecord) -> TaskResult {
        let Some(keys) = &self.deps.state_keys else {
            return result;
        };
        if !matches!(result, TaskResult::Completed(_) | TaskResult::Interrupted) {
            return result;
        }
        let violations = keys.check(&record.delta);
        if violations.is_empty() {
            return result;
        }
        let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
        let listed = listed.join("; ");
        match keys.mode() {
            Mode::Strict => TaskResult::Failed(AgentFailure::new(
                FailureKind::Agent,
                format!(
                    "the turn was refused and none of its output or state writes were stored: \
                     {listed}"
                ),
            )),
            _ => {
                tracing::warn!(key = %self.key, "undeclared or mistyped state writes: {listed}");
                result
            }
        }
    }
}
