//! Compaction of a live session: folding the events older than the window into a summary, in a
//! child task, while turns go on.

use ractor::ActorRef;

use super::Live;
use crate::session::now_ms;
use crate::session::SessionMsg;
use crate::state::{Author, Event, EventKind, Seq};

impl Live {
    /// Starts a compaction when more than `compact_after` events are not covered by the summary:
    /// a child task summarises everything older than the window (read back from the store, so
    /// only persisted events are summarised) and reports with `Compacted`. Turns go on meanwhile.
    pub(crate) fn maybe_compact(&mut self, myself: &ActorRef<SessionMsg>) {
        let (Some(summarizer), Some(after)) =
            (self.deps.summarizer.clone(), self.deps.config.compact_after)
        else {
            return;
        };
        if self.compacting || self.stopping.is_some() || !self.journal.is_settled() {
            return;
        }
        let covered = self.journal.covered_through();
        let last = self.journal.next_seq().saturating_sub(1);
        let upto = last.saturating_sub(self.deps.config.window as Seq);
        if last - covered <= after as Seq || upto <= covered {
            return;
        }
        self.compacting = true;
        let previous = self.journal.summary().cloned();
        let (store, key, actor) = (self.deps.store.clone(), self.key.clone(), myself.clone());
        let memory = self.compaction_memory();
        let draining = self.deps.draining.clone();
        self.deps.tasks.spawn(async move {
            let summary = async {
                let limit = usize::try_from(upto - covered).unwrap_or(usize::MAX);
                let span: Vec<Event> = store
                    .read_events(&key, covered + 1, limit)
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .filter(|e| !matches!(e.kind, EventKind::Summary { .. }))
                    .collect();
                if let Some(memory) = &memory {
                    super::memory::ingest_compacted(memory.as_ref(), &key, &span).await;
                }
                // A draining session throws the summary away (`compacted`): a summarizer still
                // at work then (a model call) is not waited for; the next activation compacts.
                tokio::select! {
                    summary = summarizer.summarize(previous.as_deref(), &span) => {
                        summary.map_err(|e| e.to_string())
                    }
                    () = draining.cancelled() => Err("the runtime is draining".to_owned()),
                }
            }
            .await;
            let _ = actor.send_message(SessionMsg::Compacted {
                through_seq: upto,
                summary,
            });
        });
    }

    /// Records a finished compaction as a `Summary` event (events that arrived meanwhile are
    /// after `through_seq`, so none is lost).
    pub(crate) async fn compacted(&mut self, through_seq: Seq, summary: Result<String, String>) {
        self.compacting = false;
        let text = match summary {
            Ok(text) => text,
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "compaction failed; will retry");
                return;
            }
        };
        if self.journal.settle().await.is_err()
            || through_seq <= self.journal.covered_through()
            || self.stopping.is_some()
        {
            return;
        }
        let event = Event::new(
            self.journal.next_seq(),
            Author::System,
            now_ms(),
            EventKind::Summary { text, through_seq },
        );
        // A summary the store did not take is simply made again by a later compaction.
        let _ = self.journal.commit(vec![event]).await;
    }
}
