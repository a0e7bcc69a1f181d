//! Once `Runtime::shutdown` returns and the caller drops its runtime, nothing of the runtime's
//! holds its stores: the same folders open again at once, and no compaction is still at work
//! (one still summarizing when the drain began is cancelled, its summary being of no use to a
//! stopping session). Breaking it: returning when the last session's slot is freed, while a
//! compaction (or a session's supervising task) still holds the store, makes the reopen fail
//! with `Locked`.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use support::harness::{eventually, key, within};
use turnstile::backend::FileArtifactStore;
use turnstile::context::Summarizer;
use turnstile::state::Event;
use turnstile::{AgentError, EchoAgent, FileStore, Runtime};

/// A summarizer that takes its time, as a model does; records when its work has ended, whether
/// it finished or was cancelled.
#[derive(Default)]
struct SlowSummarizer {
    started: AtomicBool,
    ended: AtomicBool,
}

/// Marks the summarizer's work ended when its future is dropped.
struct Ended<'a>(&'a AtomicBool);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The test keeps a handle on what the runtime owns.
struct Shared(Arc<SlowSummarizer>);

#[async_trait]
impl Summarizer for Shared {
    async fn summarize(
        &self,
        _previous: Option<&str>,
        span: &[Event],
    ) -> Result<String, AgentError> {
        self.0.started.store(true, Ordering::SeqCst);
        let _ended = Ended(&self.0.ended);
        // Far past the drain's grace: only a cancelled compaction lets the drain end cleanly.
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(format!("{} events", span.len()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stores_open_again_as_soon_as_shutdown_returns() {
    let root = tempfile::tempdir().expect("tempdir");
    let (sessions, artifacts) = (root.path().join("sessions"), root.path().join("artifacts"));
    let summarizer = Arc::new(SlowSummarizer::default());
    let runtime = Runtime::builder()
        .agent(EchoAgent)
        .store(FileStore::open(&sessions).expect("file store"))
        .with_artifacts(Arc::new(
            FileArtifactStore::open(&artifacts).expect("artifact store"),
        ))
        .with_window(2)
        .with_summarizer(Shared(summarizer.clone()), 2)
        .build()
        .expect("runtime");
    let k = key("ana", "compacting");
    for turn in 0..3 {
        within(runtime.call(&k, format!("turn {turn}")))
            .await
            .expect("turn");
    }
    eventually("the overflowing window to start a compaction", || {
        summarizer.started.load(Ordering::SeqCst)
    })
    .await;

    let report = within(runtime.shutdown()).await;
    assert!(report.clean, "{report:?}");
    assert!(
        summarizer.ended.load(Ordering::SeqCst),
        "shutdown returned while a compaction still ran"
    );
    drop(runtime);
    FileStore::open(&sessions).expect("the session store opens again at once");
    FileArtifactStore::open(&artifacts).expect("the artifact store opens again at once");
}
