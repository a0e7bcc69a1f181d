//! Baseline (b), the floor any ractor-based runtime pays: one bare ractor actor per session,
//! spawned on first use and kept in a map, with no registry, policies, limits or bookkeeping.
//!
//! The actor loads its session in `pre_start` and runs each turn inside its handler (the agent,
//! then the append), so its mailbox serialises the session's turns. Unlike turnstile it runs the
//! turn inline rather than as a child task, so nothing can reach the actor while a turn runs;
//! interrupts therefore go through a token held beside the actor, as turnstile's do.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use turnstile::{SessionKey, Store};

use super::super::target::{Ack, Failure, Target, TargetCounters};
use super::sim::{AgentSim, SessionState};

/// Stripes of the actor map, so that the map's own lock is not what the baseline measures.
const SHARDS: usize = 16;

/// One stripe of the session map.
type Shard = parking_lot::Mutex<HashMap<SessionKey, Arc<Entry>>>;

type Running = Arc<parking_lot::Mutex<Option<CancellationToken>>>;

/// One session: its actor (spawned by the first caller) and the running turn's token.
#[derive(Default)]
struct Entry {
    actor: OnceCell<ActorRef<Msg>>,
    running: Running,
}

/// The one message a session actor handles.
struct Msg {
    input: String,
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
        let result = state
            .session
            .run_turn(
                self.store.as_ref(),
                &state.key,
                &self.sim,
                msg.input,
                &cancel,
            )
            .await;
        *state.running.lock() = None;
        if result.is_err() {
            // The stored version is unknown after a failed append: reload.
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
    shards: Box<[Shard]>,
    activations: AtomicU64,
    interrupts: AtomicU64,
}

impl BareRactor {
    /// No actors yet; they are spawned on first use.
    pub fn new(store: Arc<dyn Store>, sim: AgentSim, window: usize) -> Self {
        Self {
            behaviour: SessionActor { store, sim, window },
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
            activations: AtomicU64::new(0),
            interrupts: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &SessionKey) -> &Shard {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        &self.shards[(hash as usize) % SHARDS]
    }

    async fn actor(&self, key: &SessionKey) -> Result<ActorRef<Msg>, Failure> {
        let entry = self
            .shard(key)
            .lock()
            .entry(key.clone())
            .or_default()
            .clone();
        let actor = entry
            .actor
            .get_or_try_init(|| async {
                let args = (key.clone(), entry.running.clone());
                let (actor, _join) = Actor::spawn(None, self.behaviour.clone(), args)
                    .await
                    .map_err(|_| Failure::Store)?;
                self.activations.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Failure>(actor)
            })
            .await?;
        Ok(actor.clone())
    }
}

impl Target for BareRactor {
    async fn turn(&self, key: &SessionKey, input: String) -> Result<Ack, Failure> {
        let actor = self.actor(key).await?;
        match actor.call(|reply| Msg { input, reply }, None).await {
            Ok(CallResult::Success(result)) => result,
            _ => Err(Failure::Other),
        }
    }

    fn interrupt(&self, key: &SessionKey) -> bool {
        let entry = self.shard(key).lock().get(key).cloned();
        let running = entry.and_then(|e| e.running.lock().clone());
        running.is_some_and(|token| {
            token.cancel();
            self.interrupts.fetch_add(1, Ordering::Relaxed);
            true
        })
    }

    fn live_sessions(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    fn counters(&self) -> TargetCounters {
        TargetCounters {
            activations: self.activations.load(Ordering::Relaxed),
            interrupts: self.interrupts.load(Ordering::Relaxed),
            peak_live_sessions: self.live_sessions(),
            ..TargetCounters::default()
        }
    }

    async fn finish(&self) {
        // Every acknowledged turn is already in the store; the actors end with the process.
    }
}
