//! Ingesting a stored session into memory: what the runtime does on passivation and on
//! [`Runtime::remember`](crate::Runtime::remember).

use super::{entries_of, MemoryStore};
use crate::error::Error;
use crate::key::SessionKey;
use crate::state::Seq;
use crate::store::Store;

/// Events read per store call while ingesting: a page of a long log, not the whole of it.
const INGEST_PAGE: usize = 500;

/// Ingests what `store` holds of the session after its memory mark, page by page. Anonymous
/// sessions have no memory: nothing is read. Returns how many entries were new.
pub(crate) async fn ingest_stored(
    store: &dyn Store,
    memory: &dyn MemoryStore,
    key: &SessionKey,
) -> Result<usize, Error> {
    if key.is_anonymous() {
        return Ok(0);
    }
    let mut from: Seq = memory.ingested_through(key).await.map_err(Error::memory)? + 1;
    let mut added = 0;
    loop {
        let events = store
            .read_events(key, from, INGEST_PAGE)
            .await
            .map_err(|err| Error::store(key, err))?;
        let Some(last) = events.last().map(|e| e.seq) else {
            break;
        };
        let entries = entries_of(key, &events);
        if !entries.is_empty() {
            added += memory.ingest(&entries).await.map_err(Error::memory)?;
        }
        if events.len() < INGEST_PAGE {
            break;
        }
        from = last + 1;
    }
    Ok(added)
}
