//! [`open_inbox`]: the channel inbox that goes with a store opened by URL.

use std::sync::Arc;

use super::{OpenedStore, StoreUrl};
use crate::inbox::{Inbox, InboxError, MemoryInbox};

/// The inbox beside `opened`: in its folder for a file store, in memory beside the memory store.
///
/// The stores several processes share (Redis, PostgreSQL) have no inbox yet: a platform's
/// message must be answered by exactly one process, which needs a claim on each entry that is
/// not built. They are refused with [`InboxError::Unavailable`] saying so.
pub async fn open_inbox(opened: &OpenedStore) -> Result<Arc<dyn Inbox>, InboxError> {
    // Exhaustive on purpose: a new backend says here where its inbox lives.
    match opened.url() {
        StoreUrl::Memory => Ok(Arc::new(MemoryInbox::new())),
        StoreUrl::DataFolder | StoreUrl::Folder(_) | StoreUrl::TempFolder => {
            let file = opened
                .file_store()
                .ok_or_else(|| InboxError::Unavailable {
                    backend: "file",
                    detail: format!("{} did not open a file store", opened.url()),
                })?
                .clone();
            let inbox = tokio::task::spawn_blocking(move || super::FileInbox::open(&file))
                .await
                .map_err(|e| InboxError::Unavailable {
                    backend: "file",
                    detail: format!("the open task did not finish: {e}"),
                })??;
            Ok(Arc::new(inbox))
        }
        StoreUrl::Redis(_) | StoreUrl::RedisCluster(_) | StoreUrl::Postgres(_) => {
            Err(InboxError::Unavailable {
                backend: "shared",
                detail: format!(
                    "channel adapters keep their inbox beside a file or memory store; {} is \
                     shared by several processes, and answering each platform message in exactly \
                     one of them is not built yet (docs/channels.md)",
                    opened.url()
                ),
            })
        }
    }
}
