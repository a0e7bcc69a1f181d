//! An append: fold the turn onto the head in Rust, then one statement that compare-and-sets
//! the head and writes the events and shared state (see `sql.rs` and `docs/stores.md`).

use super::codec::{bigint, corrupt, split_removals, StoredHead};
use super::PostgresStore;
use crate::key::SessionKey;
use crate::state::{Event, SessionRecord, SplitDelta};
use crate::store::{check_continues, Lease, StoreError};

impl PostgresStore {
    /// Appends one turn: compare-and-set on the version and, for a fenced write, on the lease.
    pub(super) async fn write(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        fence: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        let stored = match self.base_head(key, base_version).await {
            // A writer that lost its lease hears so, not that its version is stale: it must
            // stop, not reload and try again.
            Err(StoreError::Conflict { .. }) if fence.is_some() => {
                return Err(self.refusal(key, base_version, fence).await);
            }
            other => other?,
        };
        let (record, epoch) = match stored {
            Some(head) => (head.record, head.epoch),
            None => (
                SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms)),
                // Any value will do as long as a re-created session rarely repeats it.
                uuid::Uuid::new_v4().as_u64_pair().0 as i64,
            ),
        };
        let mut turn = fold(key, record, events)?;
        turn.record.version = base_version + 1;
        let record_json = serde_json::to_string(&turn.record)
            .map_err(|e| corrupt(key, format!("the head cannot be serialised: {e}")))?;
        let (user_sets, user_removed) = split_removals(&turn.shared.user);
        let (app_sets, app_removed) = split_removals(&turn.shared.app);
        let appends = if fence.is_some() {
            &self.sql.fenced
        } else {
            &self.sql.plain
        };
        let statement = if base_version == 0 {
            &appends.new
        } else {
            &appends.existing
        };
        // Whatever happens next, the cached head is no longer known to be current.
        self.remember(key, None);
        let rows = self
            .query(
                &key.to_string(),
                statement,
                &[
                    &key.user_id(),
                    &key.session_id(),
                    &bigint(base_version),
                    &bigint(turn.record.version),
                    &bigint(turn.record.updated_ms),
                    &record_json,
                    &epoch,
                    &turn.seqs,
                    &turn.bodies,
                    &user_sets,
                    &user_removed,
                    &!turn.shared.user.is_empty(),
                    &app_sets,
                    &app_removed,
                    &!turn.shared.app.is_empty(),
                    &fence.map(|l| l.token.as_str()),
                    &fence.map(|l| bigint(l.epoch)),
                ],
            )
            .await?;
        let applied: i64 = rows.first().map_or(0, |row| row.get(0));
        if applied == 1 {
            let version = turn.record.version;
            self.remember(
                key,
                Some(StoredHead {
                    record: turn.record,
                    epoch,
                }),
            );
            return Ok(version);
        }
        Err(self.refusal(key, base_version, fence).await)
    }

    /// The head an append based on `base_version` folds onto: the cached one if current, else
    /// the stored one; `Conflict` when the stored version is another.
    async fn base_head(
        &self,
        key: &SessionKey,
        base_version: u64,
    ) -> Result<Option<StoredHead>, StoreError> {
        let cached = self.heads.lock().get(key).cloned();
        if let Some(head) = cached.filter(|h| h.record.version == base_version) {
            return Ok(Some(head));
        }
        let stored = self.head(key).await?;
        let found = stored.as_ref().map_or(0, |h| h.record.version);
        if found != base_version {
            self.remember(key, stored);
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: base_version,
                found,
            });
        }
        Ok(stored)
    }
}

/// One turn as the append statement takes it.
struct Turn {
    seqs: Vec<i64>,
    bodies: Vec<String>,
    record: SessionRecord,
    shared: SplitDelta,
}

/// Folds `events` onto `record` and serialises them.
fn fold(key: &SessionKey, mut record: SessionRecord, events: &[Event]) -> Result<Turn, StoreError> {
    check_continues(key, record.next_seq, events)?;
    let mut shared = SplitDelta::default();
    let mut bodies = Vec::with_capacity(events.len());
    for event in events {
        record.apply(event);
        if let Some(delta) = &event.state_delta {
            shared.merge(SplitDelta::from_delta(delta));
        }
        bodies.push(serde_json::to_string(event).map_err(|e| {
            StoreError::InvalidRequest(format!("session {key}: event cannot be serialised: {e}"))
        })?);
    }
    if key.is_anonymous() {
        shared.user.clear();
    }
    Ok(Turn {
        seqs: events.iter().map(|e| bigint(e.seq)).collect(),
        bodies,
        record,
        shared,
    })
}
