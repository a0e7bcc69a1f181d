//! What the runtime does to whole sessions and users rather than to a turn: deleting a session
//! (through its actor, then its artifacts and memory), forking one into another, and deleting
//! everything of a user.

use super::Runtime;
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::session::{SessionMsg, StopKind};
use crate::state::{Event, Seq};
use tokio::sync::oneshot;

/// Events read per store call while forking.
const FORK_PAGE: usize = 1_000;

/// A copy of an event for a forked session: a new id, and only session-scoped state changes.
fn fork_event(mut event: Event) -> Event {
    event.id = uuid::Uuid::new_v4();
    if let Some(delta) = event.state_delta.take() {
        let kept: crate::state::StateDelta = delta
            .into_iter()
            .filter(|(k, _)| crate::state::Scope::split(k).0 == crate::state::Scope::Session)
            .collect();
        event.state_delta = (!kept.is_empty()).then_some(kept);
    }
    event
}

impl Runtime {
    /// Deletes a session: its running turn is interrupted, waiting messages are answered
    /// `Deleted`, and its data is removed from the store, its artifacts from the artifact store
    /// (if any) and its memory. Returns whether it existed (or had artifacts). Messages
    /// sent after this call start a new, empty session.
    pub async fn delete(&self, key: &SessionKey) -> Result<bool> {
        let (tx, rx) = oneshot::channel();
        self.registry()
            .submit(key, SessionMsg::Stop(StopKind::Delete(tx)))
            .await?;
        let existed = rx
            .await
            .map_err(|_| Error::SessionFailed { key: key.clone() })??;
        self.registry().deps.sent_requests.forget(key);
        let had_artifacts = self.delete_session_artifacts(key).await?;
        self.forget_session(key).await?;
        Ok(existed || had_artifacts)
    }

    /// Creates `target` as a copy of `source`'s log up to and including `at_seq` (the whole log
    /// when `None`), so that its session state is the fold up to there. The source is untouched.
    ///
    /// Copied events get new ids. Their `user:` and `app:` changes are left out: that state is
    /// shared and current, and replaying old values would rewind it. Reads what the store holds
    /// (acknowledged turns). Returns the number of events copied.
    ///
    /// With an artifact store, the source's session artifacts are copied into the target as
    /// they were at the fork point (see `docs/artifacts.md`).
    pub async fn fork(
        &self,
        source: &SessionKey,
        target: &SessionKey,
        at_seq: Option<Seq>,
    ) -> Result<u64> {
        if source == target {
            return Err(Error::InvalidRequest(
                "a session cannot be forked into itself".into(),
            ));
        }
        let store = self.store();
        let head = store
            .load(source, 0)
            .await
            .map_err(|err| Error::store(source, err))?
            .record
            .ok_or_else(|| Error::NotFound {
                key: source.clone(),
            })?;
        let last = head.next_seq.saturating_sub(1);
        let upto = at_seq.unwrap_or(last);
        if upto == 0 || upto > last {
            return Err(Error::InvalidRequest(format!(
                "at_seq {upto} is outside the source's log (1..={last})"
            )));
        }
        // With artifacts, the events past the fork point tell which versions came later.
        let read_to = if self.artifacts().is_some() {
            last
        } else {
            upto
        };
        let mut events = crate::store::read_log(store.as_ref(), source, read_to, FORK_PAGE)
            .await
            .map_err(|err| Error::store(source, err))?;
        let after_fork = events.split_off(
            events
                .len()
                .min(usize::try_from(upto).unwrap_or(usize::MAX)),
        );
        if (events.len() as u64) < upto {
            return Err(Error::InvalidRequest(format!(
                "the store returned no events of {source} from {}",
                events.len() + 1
            )));
        }
        let events: Vec<Event> = events.into_iter().map(fork_event).collect();
        match store.append(target, 0, &events).await {
            Ok(_) => {
                self.fork_artifacts(source, target, &after_fork).await?;
                Ok(events.len() as u64)
            }
            Err(crate::store::StoreError::Conflict { .. }) => Err(Error::AlreadyExists {
                key: target.clone(),
            }),
            // The fork is stored (on the primary): its artifacts go with it, then the caller
            // hears that replicas did not confirm it in time.
            Err(err @ crate::store::StoreError::NotReplicated { .. }) => {
                self.fork_artifacts(source, target, &after_fork).await?;
                Err(Error::store(target, err))
            }
            Err(err) => Err(Error::store(target, err)),
        }
    }

    /// Deletes every session of a user (live ones through their actors), the user's shared
    /// state, with an artifact store every artifact of the user and its sessions, and the
    /// user's memory. Returns how many sessions were removed from the store.
    pub async fn delete_user(&self, user_id: &str) -> Result<u64> {
        let chats = self.chat_memories(user_id).await?;
        let mut deleted = 0;
        for key in self.registry().live_keys_of(user_id) {
            if self.delete(&key).await? {
                deleted += 1;
            }
        }
        let rest = self
            .store()
            .delete_user(user_id)
            .await
            .map_err(Error::storage)?;
        self.registry().deps.sent_requests.forget_user(user_id);
        self.delete_user_artifacts(user_id).await?;
        self.forget_user(user_id, &chats).await?;
        Ok(deleted + rest)
    }
}
