//! Baseline (b), the floor any ractor-based runtime pays: one bare ractor actor per session,
//! spawned on first use and kept in a map, with no registry, policies, limits or bookkeeping.
//!
//! The actor loads its session in `pre_start` and runs each turn inside its handler (the agent,
//! then the append), so its mailbox serialises the session's turns. Unlike turnstile it runs the
//! turn inline rather than as a child task, so nothing can reach the actor while a turn runs;
//! interrupts therefore go through a token held beside the actor, as turnstile's do.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{oneshot, OnceCell};
use tokio_util::sync::CancellationToken;
use turnstile::{SessionKey, Store};

use super::super::target::{answered, Ack, Failure, Pending, Target, TargetCounters};
use super::sim::{AgentSim, SessionState, SimTurn};
use super::striped::Sessions;

type Running = Arc<parking_lot::Mutex<Option<CancellationToken>>>;

/// One session: its actor (spawned by the first caller) and the running turn's token. An entry
/// whose actor has stopped is removed from the map (see [`BareRactor::forget`]), so the next turn
/// makes a new one and spawns a new actor.
#[derive(Default)]
struct Entry {
    actor: OnceCell<ActorRef<Msg>>,
    running: Running,
}

/// The one message a session actor handles.
struct Msg {
    input: String,
    first_chunk: Option<oneshot::Sender<()>>,
    reply: RpcReplyPort<Result<Ack, Failure>>,
}

/// The actor's behaviour; shared by all sessions.
#[derive(Clone)]
struct SessionActor {
    store: Arc<dyn Store>,
    sim: AgentSim,
    window: usize,
}

struct ActorState {
    key: SessionKey,
    session: SessionState,
    running: Running,
}

impl Actor for SessionActor {
    type Msg = Msg;
    type State = ActorState;
    type Arguments = (SessionKey, Running);

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        (key, running): (SessionKey, Running),
    ) -> Result<ActorState, ActorProcessingErr> {
        let session = SessionState::load(self.store.as_ref(), &key, self.window).await?;
        Ok(ActorState {
            key,
            session,
            running,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut ActorState,
    ) -> Result<(), ActorProcessingErr> {
        let cancel = CancellationToken::new();
        *state.running.lock() = Some(cancel.clone());
        let turn = SimTurn {
            input: msg.input,
            cancel: &cancel,
            first_chunk: msg.first_chunk,
        };
        let result = state
            .session
            .run_turn(self.store.as_ref(), &state.key, &self.sim, turn)
            .await;
        *state.running.lock() = None;
        if result.is_err() {
            // The stored version is unknown after a failed append: reload. If that fails too,
            // the actor stops (the reply is dropped) and the caller forgets it.
            state.session =
                SessionState::load(self.store.as_ref(), &state.key, self.window).await?;
        }
        let _ = msg.reply.send(result);
        Ok(())
    }
}

/// The bare-ractor design.
pub struct BareRactor {
    behaviour: SessionActor,
    sessions: Sessions<Entry>,
}

impl BareRactor {
    /// No actors yet; they are spawned on first use.
    pub fn new(store: Arc<dyn Store>, sim: AgentSim, window: usize) -> Self {
        Self {
            behaviour: SessionActor { store, sim, window },
            sessions: Sessions::new(),
        }
    }

    fn entry(&self, key: &SessionKey) -> Arc<Entry> {
        self.sessions
            .shard(key)
            .lock()
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// The session's actor, spawned by the first caller.
    async fn actor(&self, key: &SessionKey, entry: &Entry) -> Result<ActorRef<Msg>, Failure> {
        let actor = entry
            .actor
            .get_or_try_init(|| async {
                let args = (key.clone(), entry.running.clone());
                let (actor, _join) = Actor::spawn(None, self.behaviour.clone(), args)
                    .await
                    .map_err(|_| Failure::Store)?;
                self.sessions.activations.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Failure>(actor)
            })
            .await?;
        Ok(actor.clone())
    }

    /// Removes `entry` (if it is still the session's) after its actor failed, so that the next
    /// turn spawns a new actor instead of sending to a dead one.
    fn forget(&self, key: &SessionKey, entry: &Arc<Entry>) {
        let mut shard = self.sessions.shard(key).lock();
        if shard.get(key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            shard.remove(key);
        }
    }
}

impl Target for BareRactor {
    async fn send<'a>(
        &'a self,
        key: &'a SessionKey,
        input: String,
        first_chunk: Option<oneshot::Sender<()>>,
    ) -> Pending<'a> {
        let entry = self.entry(key);
        let actor = match self.actor(key, &entry).await {
            Ok(actor) => actor,
            Err(failure) => return answered(Err(failure)),
        };
        let (tx, rx) = ractor::concurrency::oneshot();
        let msg = Msg {
            input,
            first_chunk,
            reply: tx.into(),
        };
        // Enqueued in the mailbox now, so the session's order is the order of `send` calls.
        if actor.send_message(msg).is_err() {
            self.forget(key, &entry);
            return answered(Err(Failure::Other));
        }
        Box::pin(async move {
            match rx.await {
                Ok(result) => result,
                Err(_) => {
                    // The actor stopped without answering.
                    self.forget(key, &entry);
                    Err(Failure::Other)
                }
            }
        })
    }

    async fn interrupt<'a>(&'a self, key: &'a SessionKey) -> bool {
        self.sessions
            .get(key)
            .is_some_and(|entry| self.sessions.interrupt(&entry.running))
    }

    fn live_sessions(&self) -> usize {
        self.sessions.len()
    }

    fn counters(&self) -> TargetCounters {
        self.sessions.counters()
    }

    async fn finish(&self) {
        // Every acknowledged turn is already in the store; the actors end with the process.
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use turnstile::store::FaultyStore;
    use turnstile::InMemoryStore;

    use super::super::super::options::{AgentKind, Latency};
    use super::*;

    /// A turn whose append and reload both fail stops the session's actor; the session's next
    /// turn must get a new actor rather than a dead `ActorRef`.
    #[tokio::test]
    async fn a_session_whose_actor_stopped_gets_a_new_one() {
        let store = FaultyStore::new(Arc::new(InMemoryStore::new()));
        let sim = AgentSim {
            kind: AgentKind::Mock,
            latency: Latency {
                min: Duration::ZERO,
                max: Duration::ZERO,
            },
            chunks: 2,
            seed: 0,
        };
        let design = BareRactor::new(store.clone(), sim, 8);
        let key = SessionKey::new("u", "s").unwrap();
        let first = design.send(&key, "a".into(), None).await.await;
        assert_eq!(first.map(|a| a.seq), Ok(2));
        // The append fails, then the reload after it.
        store.fail_next_appends(1);
        store.fail_next_loads(1);
        assert!(design.send(&key, "b".into(), None).await.await.is_err());
        let third = design.send(&key, "c".into(), None).await.await;
        assert_eq!(third.map(|a| a.seq), Ok(4), "a new actor answers");
        assert_eq!(design.counters().activations, 2);
    }
}
