//! The tasks that drive sessions through their lives: one per live session, and the reaper.

use std::sync::Arc;

use ractor::Actor;
use tokio_util::sync::CancellationToken;

use super::Registry;
use crate::key::SessionKey;
use crate::session::{
    activation_error, delete_unloadable, refused_activation, LeaseKeeper, SessionActor,
    SessionArgs, SessionMsg, SessionShared, StopKind,
};

/// Supervises one session for as long as it has a slot: spawns its actor (which loads the
/// session in `pre_start`, unless it came with the lease), publishes it, waits for it to stop
/// (after its last store call), and re-activates it if messages arrived meanwhile.
///
/// This task, not a ractor supervisor, is the session's supervisor: sessions are unlinked actors,
/// so one session's failure can never stop another, and awaiting the actor's join handle tells
/// the registry exactly when `post_stop` has finished.
pub(crate) async fn run_session(
    registry: Arc<Registry>,
    key: SessionKey,
    mut shared: Arc<SessionShared>,
) {
    loop {
        let (mut lease, mut loaded, mut claimed) = (None, None, None);
        if let Some(keeper) = &registry.deps.keeper {
            // The lease comes first, before any actor exists: what loads next is then what the
            // last owner left, and a session owned elsewhere costs no actor here. A store that
            // reads the session with the claim hands it over here, for the actor.
            let sent = tokio::time::Instant::now();
            // Boxed, as every await here but `join`'s: this task is parked on `join` for the
            // whole life of the session, and a future is as large as its largest await.
            match Box::pin(keeper.acquire_within(&key, &registry.deps)).await {
                Ok((granted, read)) => {
                    (lease, loaded) = (Some(granted), read);
                    claimed = Some((sent, sent.elapsed()));
                }
                Err(refused) => {
                    let error = refused_activation(&key, refused);
                    log_refused(&key, &error);
                    // Deletes too are refused: only the owner may delete a session it holds, and
                    // a store that cannot grant a lease is not one to delete through.
                    for msg in registry.activation_failed(&key, &error) {
                        if let SessionMsg::Stop(StopKind::Delete(reply)) = msg {
                            let _ = reply.send(Err(error.clone()));
                        }
                    }
                    return;
                }
            }
        }
        let args = SessionArgs {
            key: key.clone(),
            deps: registry.deps.clone(),
            shared,
            loaded,
            claimed,
        };
        // Boxed: this task stays parked on `join` for the whole life of the session, and an
        // inline spawn future (which contains the store's load) would size every parked task.
        let spawned = Box::pin(Actor::spawn(None, SessionActor, args)).await;
        let (actor, join) = match spawned {
            Ok(spawned) => {
                // Not kept across the session's life: this task's future is parked meanwhile.
                drop(lease);
                spawned
            }
            Err(err) => {
                let error = activation_error(&key, err);
                log_refused(&key, &error);
                let deletes = registry.activation_failed(&key, &error);
                // Deleting an unloadable session happens under its lease; a re-activation that
                // took the lease over meanwhile has a new token, which the release leaves alone.
                Box::pin(delete_unloadable(&registry.deps, &key, deletes)).await;
                if let (Some(keeper), Some(lease)) = (&registry.deps.keeper, &lease) {
                    Box::pin(keeper.release_lease(&key, lease)).await;
                }
                return;
            }
        };
        registry.publish(&key, actor);
        if join.await.is_err() {
            tracing::error!(%key, "session actor task panicked");
        }
        match registry.stopped(&key) {
            Some(next) => shared = next,
            None => return,
        }
    }
}

fn log_refused(key: &SessionKey, error: &crate::error::Error) {
    if matches!(error, crate::error::Error::OwnedElsewhere { .. }) {
        tracing::debug!(%key, %error, "not activated: owned elsewhere");
    } else {
        tracing::warn!(%key, %error, "activation failed");
    }
}

/// Renews the leases of every live session in one batch, every third of the lease TTL (sooner
/// after a round that left some unanswered: [`LeaseKeeper::retry_after`]), and stops the
/// sessions whose lease is lost (see `session::ownership`).
pub(crate) async fn renewer(
    registry: Arc<Registry>,
    keeper: Arc<LeaseKeeper>,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(keeper.renew_every());
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            at = ticks.tick() => {
                if keeper.renew_all().await {
                    // Never later than the next third would have been: a batch that waited
                    // long for its answers is followed at once, as before.
                    let retry = tokio::time::Instant::now() + keeper.retry_after();
                    ticks.reset_at(retry.min(at + keeper.renew_every()));
                }
            }
            () = keeper.lost_reported() => {}
        }
        for key in keeper.take_lost() {
            registry.lease_lost(&key);
        }
    }
}

/// Passivates sessions whose idle TTL has passed. Sleeps until the soonest deadline; woken early
/// when a sooner one appears. Calls never scan: they only stamp their session's activity.
pub(crate) async fn reaper(registry: Arc<Registry>, shutdown: CancellationToken) {
    let mut next = None;
    loop {
        let sleep = async {
            match next {
                Some(when) => tokio::time::sleep_until(when).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = registry.reaper_wake().notified() => {}
            () = sleep => {}
        }
        next = registry.reap(tokio::time::Instant::now());
    }
}
