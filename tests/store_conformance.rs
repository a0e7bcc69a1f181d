//! Every store passes the same conformance suite.

use std::sync::Arc;

use turnstile::store::conformance;
use turnstile::MemoryStore;

/// The memory store keeps every promise of the `Store` trait.
#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(|| async { Arc::new(MemoryStore::new()) as Arc<dyn turnstile::Store> })
        .await;
}
