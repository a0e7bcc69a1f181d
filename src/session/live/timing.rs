//! A finished turn's timing record, made from the marks its run left.

use std::time::Duration;

use tokio::time::Instant;

use crate::agent::{ModelRequestMarks, ToolEntry, TurnMarks};
use crate::state::{ModelRequestTiming, TurnTiming};

/// The session's loading from the store when it was activated: kept for the first turn, which
/// counts it when its message was waiting for it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Activation {
    pub began: Instant,
    pub took: Duration,
}

/// What the session knows of a turn's time before the turn itself ran.
#[derive(Debug, Clone, Copy)]
pub(super) struct Before {
    /// When the earliest of the turn's messages was taken in.
    pub admitted: Instant,
    /// When the turn started.
    pub started: Instant,
    /// Loading the session, when the turn's message woke it.
    pub load: Option<Duration>,
}

impl Before {
    /// The turn starting now, of messages the earliest of which was taken in at `admitted`;
    /// the activation counts when that message was waiting for it.
    pub(super) fn new(admitted: Instant, activation: Option<Activation>) -> Self {
        let load = activation
            .filter(|loaded| admitted <= loaded.began)
            .map(|loaded| loaded.took);
        Self {
            admitted,
            started: Instant::now(),
            load,
        }
    }
}

/// The timing record of a turn that ends at `now`: `marks` are what its run marked, `tools`
/// what it recorded (the calls' start times), `requests` its agent's requests to the model
/// (one not marked ended ends `now`).
pub(super) fn measure(
    before: &Before,
    marks: &TurnMarks,
    tools: &[ToolEntry],
    requests: &[ModelRequestMarks],
    now: Instant,
) -> TurnTiming {
    let ms = TurnTiming::ms;
    let since_agent = |at: Instant| {
        marks
            .agent_started
            .map(|started| ms(at.saturating_duration_since(started)))
    };
    TurnTiming {
        queued_ms: ms(before.started.saturating_duration_since(before.admitted)),
        load_ms: before.load.map(ms),
        permit_ms: ms(marks.permit),
        recall_ms: ms(marks.recall),
        // A turn cut short never marked its agent's end: it ran until now.
        agent_ms: since_agent(marks.agent_ended.unwrap_or(now)).unwrap_or(0),
        first_chunk_ms: marks.first_chunk.and_then(since_agent),
        tool_start_ms: tools
            .iter()
            .filter_map(|entry| match entry {
                ToolEntry::Call { started, .. } => Some(since_agent(*started).unwrap_or(0)),
                _ => None,
            })
            .collect(),
        model_requests: requests
            .iter()
            .take(TurnTiming::MAX_MODEL_REQUESTS)
            .map(|request| ModelRequestTiming {
                round: request.round,
                attempt: request.attempt,
                start_ms: since_agent(request.started).unwrap_or(0),
                first_byte_ms: request.answered.and_then(since_agent),
                end_ms: since_agent(request.ended.unwrap_or(now)).unwrap_or(0),
                status: request.status,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::BeforeAgent;

    fn call(started: Instant) -> ToolEntry {
        ToolEntry::Call {
            call_id: "c".into(),
            name: "t".into(),
            arguments: serde_json::Value::Null,
            server: None,
            started,
            for_caller: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_places_each_phase_from_the_marks() {
        let admitted = Instant::now();
        let activation = Activation {
            began: admitted + Duration::from_millis(1),
            took: Duration::from_millis(4),
        };
        tokio::time::advance(Duration::from_millis(10)).await;
        let before = Before::new(admitted, Some(activation));
        let agent = before.started + Duration::from_millis(5);
        let mut marks = TurnMarks::default();
        marks.permit = Duration::from_millis(2);
        marks.recall = Duration::from_millis(3);
        marks.agent_started = Some(agent);
        marks.agent_ended = Some(agent + Duration::from_millis(50));
        marks.first_chunk = Some(agent + Duration::from_millis(30));
        let tools = [call(agent + Duration::from_millis(7)), call(agent)];
        let requests = [
            ModelRequestMarks {
                round: 1,
                attempt: 1,
                started: agent + Duration::from_millis(1),
                answered: Some(agent + Duration::from_millis(2)),
                ended: Some(agent + Duration::from_millis(3)),
                status: Some(503),
            },
            // Never ended: it ends with the turn.
            ModelRequestMarks {
                round: 1,
                attempt: 2,
                started: agent + Duration::from_millis(5),
                answered: None,
                ended: None,
                status: None,
            },
        ];
        let timing = measure(
            &before,
            &marks,
            &tools,
            &requests,
            agent + Duration::from_millis(60),
        );
        assert_eq!(
            timing
                .model_requests
                .iter()
                .map(|r| (r.attempt, r.start_ms, r.first_byte_ms, r.end_ms, r.status))
                .collect::<Vec<_>>(),
            vec![(1, 1, Some(2), 3, Some(503)), (2, 5, None, 60, None)]
        );
        assert_eq!(timing.queued_ms, 10);
        assert_eq!(timing.load_ms, Some(4));
        assert_eq!((timing.permit_ms, timing.recall_ms), (2, 3));
        assert_eq!(timing.agent_ms, 50);
        assert_eq!(timing.first_chunk_ms, Some(30));
        assert_eq!(timing.tool_start_ms, vec![7, 0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_cut_short_runs_until_it_ended_and_a_later_message_pays_no_load() {
        let activation = Activation {
            began: Instant::now(),
            took: Duration::from_millis(4),
        };
        tokio::time::advance(Duration::from_millis(10)).await;
        // Taken in after the session was loaded: the load was not its to wait for.
        let before = Before::new(Instant::now(), Some(activation));
        assert_eq!(before.load, None);
        let mut marks = TurnMarks::default();
        marks.agent_started = Some(before.started);
        let timing = measure(
            &before,
            &marks,
            &[],
            &[],
            before.started + Duration::from_millis(9),
        );
        assert_eq!(timing.agent_ms, 9);
        assert_eq!(timing.first_chunk_ms, None);
        // A turn that never reached its agent (no permit) has no agent time.
        let none = measure(&before, &TurnMarks::default(), &[], &[], Instant::now());
        assert_eq!(none.agent_ms, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_cut_short_before_its_agent_gives_the_time_to_the_phase_it_was_in() {
        let start = Instant::now();
        let mut marks = TurnMarks::default();
        marks.enter(BeforeAgent::Permit, start);
        marks.enter(BeforeAgent::Recall, start + Duration::from_millis(4));
        marks.end(start + Duration::from_millis(30));
        marks.end(start + Duration::from_millis(99));
        assert_eq!(marks.permit, Duration::from_millis(4));
        assert_eq!(
            marks.recall,
            Duration::from_millis(26),
            "the first end counts"
        );
        assert_eq!((marks.agent_started, marks.agent_ended), (None, None));

        let mut marks = TurnMarks::default();
        marks.enter(BeforeAgent::Recall, start);
        marks.agent_starts(start + Duration::from_millis(1));
        marks.end(start + Duration::from_millis(8));
        assert_eq!(marks.recall, Duration::from_millis(1));
        assert_eq!(marks.agent_ended, Some(start + Duration::from_millis(8)));
    }
}
