//! Removing sessions — one, a user's, or those gc chooses: heads first, then their events.

use super::codec::bigint;
use super::errors::pg_error;
use super::{PostgresStore, BATCH};
use crate::key::SessionKey;
use crate::store::{GcPolicy, GcReport, StoreError};

impl PostgresStore {
    /// Removes the sessions named by `users`/`sessions` (and, where `updated` is given, only if
    /// not updated since), heads first, in one transaction. Returns the keys removed.
    pub(super) async fn remove(
        &self,
        users: Vec<String>,
        sessions: Vec<String>,
        updated: Vec<Option<i64>>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let sql = self.sql.clone();
        self.run(|mut client| async move {
            let about = "delete";
            let tx = client.transaction().await.map_err(|e| pg_error(about, e))?;
            let work = async {
                let heads = tx.prepare_cached(&sql.delete_heads).await?;
                let rows = tx.query(&heads, &[&users, &sessions, &updated]).await?;
                let removed: Vec<(String, String)> =
                    rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                if !removed.is_empty() {
                    // A second statement, so a second snapshot: it sees the events of any
                    // append that committed while the heads' deletion waited for it.
                    let (u, s): (Vec<&str>, Vec<&str>) = removed
                        .iter()
                        .map(|(u, s)| (u.as_str(), s.as_str()))
                        .unzip();
                    let events = tx.prepare_cached(&sql.delete_events).await?;
                    tx.execute(&events, &[&u, &s]).await?;
                }
                Ok::<_, tokio_postgres::Error>(removed)
            };
            let removed = work.await.map_err(|e| pg_error(about, e))?;
            tx.commit().await.map_err(|e| pg_error(about, e))?;
            Ok(removed)
        })
        .await
    }

    /// Removes sessions chosen by gc (user, session, updated_ms as seen), skipping any updated
    /// since, and forgets their heads.
    async fn remove_chosen(
        &self,
        rows: &[tokio_postgres::Row],
        removed: &mut Vec<SessionKey>,
    ) -> Result<usize, StoreError> {
        let users = rows.iter().map(|r| r.get(0)).collect();
        let sessions = rows.iter().map(|r| r.get(1)).collect();
        let updated = rows.iter().map(|r| Some(r.get(2))).collect();
        let gone = self.remove(users, sessions, updated).await?;
        let count = gone.len();
        for (user, session) in gone {
            let key = if user.is_empty() {
                SessionKey::anonymous(session)
            } else {
                SessionKey::new(user, session)
            };
            if let Ok(key) = key {
                self.remember(&key, None);
                removed.push(key);
            }
        }
        Ok(count)
    }

    /// [`Store::delete_user`]: the user's heads, then (a fresh snapshot) their events and user
    /// state, in one transaction.
    pub(super) async fn remove_user(&self, user_id: &str) -> Result<u64, StoreError> {
        {
            let mut heads = self.heads.lock();
            let theirs: Vec<SessionKey> = heads
                .iter()
                .filter(|(key, _)| key.user_id() == user_id)
                .map(|(key, _)| key.clone())
                .collect();
            for key in theirs {
                heads.pop(&key);
            }
        }
        let sql = self.sql.clone();
        let user = user_id.to_owned();
        self.run(|mut client| async move {
            let about = format!("user {user}");
            let tx = client
                .transaction()
                .await
                .map_err(|e| pg_error(&about, e))?;
            let work = async {
                let heads = tx.prepare_cached(&sql.delete_user_heads).await?;
                let removed = tx.execute(&heads, &[&user]).await?;
                // A new snapshot: events of appends that committed meanwhile go too.
                let rest = tx.prepare_cached(&sql.delete_user_rest).await?;
                tx.execute(&rest, &[&user]).await?;
                Ok::<_, tokio_postgres::Error>(removed)
            };
            let removed = work.await.map_err(|e| pg_error(&about, e))?;
            tx.commit().await.map_err(|e| pg_error(&about, e))?;
            Ok(removed)
        })
        .await
    }

    /// [`Store::gc`]: batches chosen by the `heads_by_update` index.
    pub(super) async fn collect(
        &self,
        policy: &GcPolicy,
        now_ms: u64,
    ) -> Result<GcReport, StoreError> {
        let mut removed = Vec::new();
        if let Some(max_age) = policy.max_age {
            let age = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
            let cutoff = bigint(now_ms.saturating_sub(age));
            loop {
                let rows = self
                    .read("gc", &self.sql.gc_old, &[&cutoff, &BATCH])
                    .await?;
                // A batch that removes nothing (all updated since) ends the pass.
                if rows.is_empty() || self.remove_chosen(&rows, &mut removed).await? == 0 {
                    break;
                }
            }
        }
        if let Some(max) = policy.max_sessions {
            loop {
                let rows = self.read("gc", &self.sql.count, &[]).await?;
                let count: i64 = rows.first().map_or(0, |r| r.get(0));
                let excess = count.saturating_sub(bigint(max as u64));
                if excess <= 0 {
                    break;
                }
                let rows = self
                    .read("gc", &self.sql.gc_oldest, &[&excess.min(BATCH)])
                    .await?;
                if self.remove_chosen(&rows, &mut removed).await? == 0 {
                    break;
                }
            }
        }
        Ok(GcReport { removed })
    }
}
