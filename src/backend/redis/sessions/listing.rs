//! Listing, user deletion and garbage collection: the Redis store's index walks, in bounded
//! batches. Each index is one key (one slot); each session it names is read or removed by its
//! own command in the session's slot, so nothing here crosses slots on a Cluster.

use futures::future::try_join_all;

use super::keys::{gc_member, parse_gc_member};
use super::{Deleted, RedisStore};
use crate::key::SessionKey;
use crate::store::{check_page, GcPolicy, GcReport, Page, PageRequest, SessionMeta, StoreError};

/// How many sessions `delete_user` and `gc` handle per round trip, so that neither holds an
/// unbounded batch in memory or blocks Redis for long.
const BATCH: usize = 500;

impl RedisStore {
    pub(super) async fn list_page(
        &self,
        user_id: &str,
        page: &PageRequest,
    ) -> Result<Page, StoreError> {
        check_page(page)?;
        let min = page
            .cursor
            .as_ref()
            .map_or("-".to_owned(), |c| format!("({c}"));
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("ZRANGEBYLEX")
            .arg(self.keys.index(user_id))
            .arg(min)
            .arg("+")
            .arg("LIMIT")
            .arg(0)
            .arg(page.limit + 1)
            .to_owned();
        let about = format!("user {user_id}");
        let mut ids: Vec<String> = self.run(&about, cmd.query_async(&mut conn)).await?;
        let more = ids.len() > page.limit;
        ids.truncate(page.limit);
        let keys: Vec<SessionKey> = ids
            .iter()
            .filter_map(|id| {
                if user_id.is_empty() {
                    SessionKey::anonymous(id.as_str()).ok()
                } else {
                    SessionKey::new(user_id, id.as_str()).ok()
                }
            })
            .collect();
        let heads = try_join_all(keys.iter().map(|key| self.read_session(key, 0))).await?;
        let mut sessions = Vec::with_capacity(keys.len());
        for (key, (head, _)) in keys.iter().zip(heads) {
            match head {
                Some(head) => sessions.push(SessionMeta::of(&head.record)),
                // Expired by its TTL, or deleted while its entry was being written: drop the
                // index entries it left behind.
                None => {
                    self.delete_one(key, None).await?;
                }
            }
        }
        Ok(Page {
            sessions,
            next_cursor: more.then(|| ids.last().cloned()).flatten(),
        })
    }

    pub(super) async fn delete_user_sessions(&self, user_id: &str) -> Result<u64, StoreError> {
        let about = format!("user {user_id}");
        let index = self.keys.index(user_id);
        let mut removed = 0;
        let mut conn = self.conn.clone();
        loop {
            let cmd = redis::cmd("ZRANGE")
                .arg(&index)
                .arg(0)
                .arg(BATCH - 1)
                .to_owned();
            let ids: Vec<String> = self.run(&about, cmd.query_async(&mut conn)).await?;
            if ids.is_empty() {
                break;
            }
            let mut keys = Vec::with_capacity(ids.len());
            for id in ids {
                let key = if user_id.is_empty() {
                    SessionKey::anonymous(id.as_str())
                } else {
                    SessionKey::new(user_id, id.as_str())
                };
                match key {
                    Ok(key) => keys.push(key),
                    Err(_) => {
                        let cmd = redis::cmd("ZREM").arg(&index).arg(&id).to_owned();
                        let _: i64 = self.run(&about, cmd.query_async(&mut conn)).await?;
                    }
                }
            }
            let outcomes = try_join_all(keys.iter().map(|key| self.delete_one(key, None))).await?;
            removed += outcomes.iter().filter(|d| **d == Deleted::Removed).count() as u64;
        }
        let cmd = redis::cmd("DEL")
            .arg(self.keys.user_state(user_id))
            .arg(&index)
            .to_owned();
        let _: i64 = self.run(&about, cmd.query_async(&mut conn)).await?;
        Ok(removed)
    }

    pub(super) async fn collect(
        &self,
        policy: &GcPolicy,
        now_ms: u64,
    ) -> Result<GcReport, StoreError> {
        let mut removed = Vec::new();
        let mut conn = self.conn.clone();
        let gc = self.keys.gc();
        if let Some(max_age) = policy.max_age {
            let age = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
            let cutoff = now_ms.saturating_sub(age);
            let mut previous = Vec::new();
            loop {
                let cmd = redis::cmd("ZRANGEBYSCORE")
                    .arg(&gc)
                    .arg("-inf")
                    .arg(format!("({cutoff}"))
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(BATCH)
                    .to_owned();
                let batch: Vec<(String, String)> =
                    self.run("gc index", cmd.query_async(&mut conn)).await?;
                // An unchanged batch means nothing could be removed; stop rather than spin.
                if batch.is_empty() || batch == previous {
                    break;
                }
                previous.clone_from(&batch);
                self.gc_batch(batch, &mut removed).await?;
            }
        }
        if let Some(max) = policy.max_sessions {
            // Each round removes the oldest excess; a session updated after its score moves out
            // of the way. A round that changes nothing ends the loop.
            loop {
                let count: usize = self
                    .run(
                        "gc index",
                        redis::cmd("ZCARD").arg(&gc).query_async(&mut conn),
                    )
                    .await?;
                if count <= max {
                    break;
                }
                let take = (count - max).min(BATCH);
                let cmd = redis::cmd("ZRANGE")
                    .arg(&gc)
                    .arg(0)
                    .arg(take - 1)
                    .arg("WITHSCORES")
                    .to_owned();
                let batch: Vec<(String, String)> =
                    self.run("gc index", cmd.query_async(&mut conn)).await?;
                if self.gc_batch(batch, &mut removed).await? == 0 {
                    break;
                }
            }
        }
        Ok(GcReport { removed })
    }

    /// Removes the sessions of the members in `batch` (member, score) that were not updated
    /// after their score, and moves the others' scores up to their heads' real `updated_ms`.
    /// Returns how many members it removed, dropped or moved.
    async fn gc_batch(
        &self,
        batch: Vec<(String, String)>,
        removed: &mut Vec<SessionKey>,
    ) -> Result<usize, StoreError> {
        let outcomes = try_join_all(batch.iter().map(|(member, score)| async move {
            match parse_gc_member(member) {
                Some(key) => {
                    let outcome = self.delete_one(&key, Some(score)).await?;
                    Ok::<_, StoreError>(Some((key, outcome)))
                }
                None => {
                    // Not a member this layout writes; drop it so gc does not meet it again.
                    let mut conn = self.conn.clone();
                    let cmd = redis::cmd("ZREM")
                        .arg(self.keys.gc())
                        .arg(member)
                        .to_owned();
                    let _: i64 = self.run("gc index", cmd.query_async(&mut conn)).await?;
                    Ok(None)
                }
            }
        }))
        .await?;
        let mut changed = 0;
        for outcome in outcomes {
            changed += 1;
            match outcome {
                Some((key, Deleted::Removed)) => removed.push(key),
                Some((key, Deleted::Kept(updated))) => {
                    let mut conn = self.conn.clone();
                    let cmd = redis::cmd("ZADD")
                        .arg(self.keys.gc())
                        .arg("XX")
                        .arg("GT")
                        .arg(updated)
                        .arg(gc_member(&key))
                        .to_owned();
                    let _: i64 = self.run("gc index", cmd.query_async(&mut conn)).await?;
                }
                Some((_, Deleted::Absent)) | None => {}
            }
        }
        Ok(changed)
    }
}
