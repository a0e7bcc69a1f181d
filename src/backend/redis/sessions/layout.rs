//! The layout version under a prefix: checked (and, on a fresh prefix, written) on connect, so
//! that a build never reads or writes data laid out by a newer one, nor by an older layout it no
//! longer reads; the one older layout it reads as it is gets its mark moved up.

use super::keys::{LAYOUT_VERSION, UPGRADES_FROM};
use super::RedisStore;
use crate::store::StoreError;

impl RedisStore {
    /// Refuses a prefix laid out by another version; marks a fresh one as this version's, and
    /// one of layout [`UPGRADES_FROM`] too when the operator says so (`upgrade_from`).
    pub(super) async fn check_layout(&self, upgrade_from: Option<u32>) -> Result<(), StoreError> {
        let about = format!("prefix {}", self.keys.prefix());
        let layout = self.keys.layout();
        let mut conn = self.conn.clone();
        let read = redis::cmd("GET").arg(&layout).to_owned();
        let mut found: Option<String> = self.run(&about, read.query_async(&mut conn)).await?;
        if found.is_none() {
            self.refuse_unversioned_data(&about).await?;
            // SET NX GET: marks the fresh prefix, or reads the mark another process just set.
            let mark = redis::cmd("SET")
                .arg(&layout)
                .arg(LAYOUT_VERSION)
                .arg("NX")
                .arg("GET")
                .to_owned();
            found = self.run(&about, mark.query_async(&mut conn)).await?;
        }
        let Some(found) = found else {
            return Ok(());
        };
        let found: u32 = found.parse().map_err(|_| StoreError::Corrupt {
            key: layout.clone(),
            detail: format!("redis: the layout version {found:?} is not a number"),
        })?;
        if found > LAYOUT_VERSION {
            return Err(StoreError::NewerLayout {
                backend: "redis",
                place: about,
                found,
                supported: LAYOUT_VERSION,
            });
        }
        if found == UPGRADES_FROM {
            if upgrade_from != Some(UPGRADES_FROM) {
                return Err(StoreError::InvalidRequest(format!(
                    "redis store, {about}: the data there has key layout {UPGRADES_FROM}. This \
                     build (layout {LAYOUT_VERSION}) can use that data as it is, but not while \
                     a process of an older build still runs on the prefix. Stop every such \
                     process, then connect once with `upgrade_from={UPGRADES_FROM}` in the \
                     store URL (in code: `RedisOptions::with_upgrade_from`); nothing was \
                     changed"
                )));
            }
            return self.upgrade_layout(&about).await;
        }
        if found < LAYOUT_VERSION {
            return Err(older_layout(&about, found));
        }
        Ok(())
    }

    /// Marks a prefix of layout [`UPGRADES_FROM`] as [`LAYOUT_VERSION`], unless another
    /// process changed its mark meanwhile; then the mark found is checked as on connect.
    async fn upgrade_layout(&self, about: &str) -> Result<(), StoreError> {
        let layout = self.keys.layout();
        // Compare-and-set: a mark another process changed meanwhile is left as it is.
        let upgrade = redis::cmd("EVAL")
            .arg(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                   redis.call('SET', KEYS[1], ARGV[2]) \
                   return {1, ARGV[2]} \
                 end \
                 return {0, redis.call('GET', KEYS[1])}",
            )
            .arg(1)
            .arg(&layout)
            .arg(UPGRADES_FROM)
            .arg(LAYOUT_VERSION)
            .to_owned();
        let mut conn = self.conn.clone();
        let (upgraded, found): (i64, Option<String>) =
            self.run(about, upgrade.query_async(&mut conn)).await?;
        match found.as_deref().map(|f| (f, f.parse::<u32>())) {
            Some((_, Ok(LAYOUT_VERSION))) => {
                if upgraded == 1 {
                    tracing::info!(
                        "redis store, {about}: key layout {UPGRADES_FROM} marked as layout \
                         {LAYOUT_VERSION}; its data is kept as it is"
                    );
                }
                Ok(())
            }
            Some((_, Ok(found))) if found > LAYOUT_VERSION => Err(StoreError::NewerLayout {
                backend: "redis",
                place: about.to_owned(),
                found,
                supported: LAYOUT_VERSION,
            }),
            Some((_, Ok(found))) => Err(older_layout(about, found)),
            Some((text, Err(_))) => Err(StoreError::Corrupt {
                key: layout,
                detail: format!("redis: the layout version {text:?} is not a number"),
            }),
            None => Err(StoreError::InvalidRequest(format!(
                "redis store, {about}: the layout mark was removed while this build upgraded \
                 it; nothing was changed, connect again"
            ))),
        }
    }

    /// Data of layout 1, which wrote no version, always had a gc index or app state: an
    /// unmarked prefix that has either is refused.
    async fn refuse_unversioned_data(&self, about: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let gc = redis::cmd("EXISTS").arg(self.keys.gc()).to_owned();
        let gc: i64 = self.run(about, gc.query_async(&mut conn)).await?;
        let app = redis::cmd("EXISTS").arg(self.keys.app()).to_owned();
        let app: i64 = self.run(about, app.query_async(&mut conn)).await?;
        if gc + app == 0 {
            return Ok(());
        }
        Err(older_layout(about, 1))
    }
}

fn older_layout(about: &str, found: u32) -> StoreError {
    StoreError::InvalidRequest(format!(
        "redis store, {about}: the data there has layout version {found}, which this build \
         (layout {LAYOUT_VERSION}) does not read; nothing was changed. Use another prefix, or \
         remove the old data"
    ))
}
