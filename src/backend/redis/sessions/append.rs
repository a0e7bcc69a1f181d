//! An append: the fold in Rust, the compare-and-set commit in the session's slot (`append.lua`),
//! then the follow-up writes to shared state and indexes, which live in other slots.

use std::sync::Arc;

use redis::{Cmd, ErrorKind, ServerErrorKind};

use super::codec::{corrupt, delta_pipeline, StoredHead};
use super::keys::gc_member;
use super::leases::owner_from;
use super::{RedisStore, CHECKPOINT_EVENTS};
use crate::key::SessionKey;
use crate::state::{Event, SessionRecord, SplitDelta};
use crate::store::{check_continues, Lease, Store, StoreError};

/// Room in an append's command for everything but the events and the checkpoint: the script's
/// hash, three key names and the numbers (about 400 bytes with a 64-byte prefix).
const CALL_OVERHEAD_BYTES: usize = 512;

impl StoredHead {
    /// The cache's note that a session is not stored (read so by a load): an append on base 0
    /// then needs no read first. A stored head never has version 0.
    pub(super) fn absent(key: &SessionKey) -> Self {
        Self {
            record: SessionRecord::new(key.clone(), 0),
            epoch: String::new(),
            checkpoint_seq: 1,
            indexed: false,
            names: None,
        }
    }

    /// Whether this is a stored session rather than [`StoredHead::absent`].
    pub(super) fn exists(&self) -> bool {
        self.record.version > 0
    }
}

impl RedisStore {
    /// [`Store::append`](crate::store::Store::append) for Redis.
    pub(super) async fn append_turn(
        &self,
        key: &SessionKey,
        base_version: u64,
        events: &[Event],
        lease: Option<&Lease>,
    ) -> Result<u64, StoreError> {
        let mut head = match (self.base_head(key, base_version).await, lease) {
            (Ok(head), _) => head,
            // A writer that is no longer the owner hears so, rather than that it is behind:
            // reloading and retrying would not help it.
            (Err(StoreError::Conflict { .. }), Some(lease)) if !self.holds(key, lease).await? => {
                return Err(StoreError::NotOwner {
                    key: key.clone(),
                    owner: self.owner_of(key).await?,
                });
            }
            (Err(e), _) => return Err(e),
        };
        if !head.exists() {
            head.record = SessionRecord::new(key.clone(), events.first().map_or(0, |e| e.at_ms));
            head.epoch = uuid::Uuid::new_v4().simple().to_string();
        }
        let created = base_version == 0;
        check_continues(key, head.record.next_seq, events)?;
        let mut shared = SplitDelta::default();
        let mut lines = Vec::with_capacity(events.len());
        for event in events {
            head.record.apply(event);
            if let Some(delta) = &event.state_delta {
                shared.merge(SplitDelta::from_delta(delta));
            }
            lines.push(serde_json::to_string(event).map_err(|e| {
                StoreError::InvalidRequest(format!(
                    "session {key}: event cannot be serialised: {e}"
                ))
            })?);
        }
        if key.is_anonymous() {
            shared.user.clear();
        }
        head.record.version = base_version + 1;
        let checkpoint = created || head.record.next_seq - head.checkpoint_seq > CHECKPOINT_EVENTS;
        let record_json = if checkpoint {
            head.checkpoint_seq = head.record.next_seq;
            serde_json::to_string(&head.record)
                .map_err(|e| corrupt(key, format!("the head cannot be serialised: {e}")))?
        } else {
            String::new()
        };

        let names = head
            .names
            .get_or_insert_with(|| Arc::new(self.session_keys(key)))
            .clone();
        // EVALSHA by hand rather than a `ScriptInvocation`: a replicated append pipelines it
        // with its WAIT. Sized up front, so that the events are copied into it once.
        let bytes = lines.iter().map(String::len).sum::<usize>() + record_json.len();
        let args = 14 + usize::from(lease.is_some()) + lines.len();
        let mut call = Cmd::with_capacity(args, bytes + CALL_OVERHEAD_BYTES);
        call.arg("EVALSHA")
            .arg(self.scripts.append.get_hash())
            .arg(if lease.is_some() { 3 } else { 2 })
            .arg(&names.head)
            .arg(&names.log);
        if lease.is_some() {
            call.arg(&names.lease);
        }
        call.arg(base_version)
            .arg(&head.epoch)
            .arg(head.record.version)
            .arg(head.record.updated_ms)
            .arg(head.record.next_seq)
            .arg(self.ttl_ms)
            .arg(record_json)
            .arg(lease.map_or("", |l| l.token.as_str()))
            .arg(lease.map(|l| l.epoch.to_string()).unwrap_or_default())
            .arg(&lines);
        let (reply, mut acked) = self.commit(key, call).await?;
        // With replicas, what a replica check found, when the count had to be asked again.
        let mut rechecked = Ok(());
        let version = match committed(key, base_version, lease, reply) {
            // The script may have run twice: a cluster connection that broke after sending it
            // sends it again on the next, and the second run meets the version the first one
            // wrote. Events carry random ids, so finding this append's own is proof it
            // committed; how many replicas hold it is then checked anew.
            Err(StoreError::Conflict { found, .. })
                if found == base_version + 1 && self.stored_already(key, events).await? =>
            {
                tracing::info!(%key, "an append sent twice had committed the first time");
                acked = None;
                if self.replicated.is_some() {
                    rechecked = Box::pin(self.confirm_replicated(key, found)).await;
                }
                found
            }
            other => other?,
        };
        // Committed: what follows may fail without failing the turn.
        let mut to_send = {
            let mut unsent = self.unsent.lock();
            // Nearly always empty: only a failed follow-up leaves something to send again.
            (!unsent.is_empty())
                .then(|| unsent.pop(key))
                .flatten()
                .unwrap_or_default()
        };
        to_send.merge(shared);
        let index = !head.indexed || checkpoint;
        // Most turns have nothing to follow up; the follow-up is boxed so that the future of
        // every append does not carry (and move) its room.
        if index || !to_send.user.is_empty() || !to_send.app.is_empty() {
            let following = Box::pin(self.follow_up(key, &head.record, index, to_send));
            let (indexed, unsent) = following.await;
            head.indexed = head.indexed || indexed;
            if !unsent.is_empty() {
                self.unsent.lock().put(key.clone(), unsent);
            }
        }
        self.remember(key, Some(head));
        rechecked?;
        match (&self.replicated, acked) {
            (Some(replicated), Some((acked, false))) if acked < replicated.wanted => {
                Err(StoreError::NotReplicated {
                    key: key.clone(),
                    version,
                    acked,
                    wanted: replicated.wanted,
                    timeout: replicated.timeout,
                })
            }
            _ => Ok(version),
        }
    }

    /// Runs the append script: on the shared connection, or with `replicas=N` on a dedicated
    /// one followed by `WAIT` (then also answers how many replicas confirmed it).
    async fn commit(
        &self,
        key: &SessionKey,
        call: Cmd,
    ) -> Result<(Vec<Option<String>>, Option<(u32, bool)>), StoreError> {
        let script = &self.scripts.append;
        if let Some(replicated) = &self.replicated {
            // Boxed: the rarer path should not size every append's future.
            let slot = self.keys.session_slot(key);
            let committed = Box::pin(replicated.commit(key, slot, script, call)).await?;
            return Ok((committed.reply, Some((committed.acked, committed.degraded))));
        }
        let mut conn = self.conn.for_session(key);
        let evaluation = async {
            match call.query_async(&mut conn).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    script.load_async(&mut conn).await?;
                    call.query_async(&mut conn).await
                }
                other => other,
            }
        };
        Ok((self.run(key, evaluation).await?, None))
    }

    /// Whether the log holds `events` themselves (same ids) where they would go. A read that
    /// fails leaves the append's outcome unknown: `Unavailable`, never a `Conflict` that would
    /// say it was not stored.
    async fn stored_already(&self, key: &SessionKey, events: &[Event]) -> Result<bool, StoreError> {
        let Some(first) = events.first() else {
            return Ok(false);
        };
        match Store::read_events(self, key, first.seq, events.len()).await {
            Ok(stored) => Ok(stored.len() == events.len()
                && stored.iter().zip(events).all(|(s, mine)| s.id == mine.id)),
            Err(error) => Err(super::errors::unavailable(format!(
                "the append met a newer version and reading back whether it was its own failed \
                 ({error}): its outcome is unknown"
            ))),
        }
    }

    /// The head an append on `base_version` folds onto: the cached one if it is at that
    /// version, else the stored one (a `Conflict` if that is at another version).
    async fn base_head(
        &self,
        key: &SessionKey,
        base_version: u64,
    ) -> Result<Box<StoredHead>, StoreError> {
        // Taken out: whatever happens next, the cached head is no longer known to be current
        // until this append puts it back.
        if let Some(head) = self
            .take_head(key)
            .filter(|h| h.record.version == base_version)
        {
            return Ok(head);
        }
        // Boxed: a read before an append is the rare path (a head not kept, or a conflict).
        let (stored, _) = Box::pin(self.read_session(key, 0)).await?;
        let stored = Box::new(stored.unwrap_or_else(|| StoredHead::absent(key)));
        let found = stored.record.version;
        if found != base_version {
            self.remember(key, Some(stored));
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: base_version,
                found,
            });
        }
        Ok(stored)
    }

    /// Writes what follows a committed append, each in its own slot and all at once: the
    /// session's index entries (with `index`) and the `user:` and `app:` changes. Never fails
    /// the turn, which is durable already: returns whether the index entries were written and
    /// the changes that were not, for the session's next append to send again.
    async fn follow_up(
        &self,
        key: &SessionKey,
        record: &SessionRecord,
        index: bool,
        shared: SplitDelta,
    ) -> (bool, SplitDelta) {
        let indexing = async {
            if !index {
                return Ok(());
            }
            let user = redis::cmd("ZADD")
                .arg(self.keys.index(key.user_id()))
                .arg(0)
                .arg(key.session_id())
                .to_owned();
            // GT: a score only moves forward, whichever process writes it last.
            let gc = redis::cmd("ZADD")
                .arg(self.keys.gc())
                .arg("GT")
                .arg(record.updated_ms)
                .arg(gc_member(key))
                .to_owned();
            let (mut a, mut b) = (self.conn.for_session(key), self.conn.for_session(key));
            self.run(key, async {
                futures::try_join!(
                    user.query_async::<i64>(&mut a),
                    gc.query_async::<i64>(&mut b)
                )
            })
            .await
            .map(|_| ())
        };
        let merge = |target: String, delta: &crate::state::StateDelta| {
            let pipe = delta_pipeline(&target, delta);
            async move {
                let Some(pipe) = pipe else { return Ok(()) };
                let mut conn = self.conn.for_session(key);
                self.run(key, pipe.query_async::<()>(&mut conn)).await
            }
        };
        // Named only when there is something to write: most turns change no shared state.
        let user_target = if shared.user.is_empty() {
            String::new()
        } else {
            self.keys.user_state(key.user_id())
        };
        let app_target = if shared.app.is_empty() {
            String::new()
        } else {
            self.keys.app()
        };
        let (indexed, user, app) = futures::join!(
            indexing,
            merge(user_target, &shared.user),
            merge(app_target, &shared.app)
        );
        let mut unsent = SplitDelta::default();
        for (what, result) in [
            ("index entries", &indexed),
            ("user: state", &user),
            ("app: state", &app),
        ] {
            if let Err(e) = result {
                tracing::warn!(session = %key, error = %e, "redis store: the turn is committed, but its {what} were not written; the session's next append sends them again");
            }
        }
        if user.is_err() {
            unsent.user = shared.user;
        }
        if app.is_err() {
            unsent.app = shared.app;
        }
        (indexed.is_ok(), unsent)
    }
}

/// The new version from `append.lua`'s reply, or the refusal it reports.
fn committed(
    key: &SessionKey,
    base_version: u64,
    lease: Option<&Lease>,
    reply: Vec<Option<String>>,
) -> Result<u64, StoreError> {
    let mut reply = reply.into_iter();
    let outcome = reply.next().flatten();
    let mut field = || reply.next().flatten();
    let mut number = |what: &str| {
        let text = field().unwrap_or_default();
        text.parse::<u64>()
            .map_err(|_| corrupt(key, format!("stored {what} {text:?} is not a number")))
    };
    match outcome.as_deref() {
        Some("1") => number("version"),
        Some("0") => Err(StoreError::Conflict {
            key: key.clone(),
            expected: base_version,
            found: number("version")?,
        }),
        Some("-1") => {
            let (address, instance, epoch) = (field(), field(), field());
            Err(StoreError::NotOwner {
                key: key.clone(),
                owner: owner_from(key, address, instance, epoch)?,
            })
        }
        Some("-2") => Err(StoreError::Fenced {
            key: key.clone(),
            epoch: lease.map_or(0, |l| l.epoch),
            current: number("lease epoch")?,
        }),
        _ => Err(corrupt(key, "unexpected reply to an append")),
    }
}
