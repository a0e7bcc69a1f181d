//! Checks of a store's [`Leases`](crate::store::Leases) and fenced writes, through two handles
//! that stand for two processes (see [`super::run_leases`]).

use std::sync::Arc;
use std::time::Duration;

use super::{key, turn_events};
use crate::store::{Claim, Claimant, Lease, Leases, Renewal, Store, StoreError};

/// Long enough that no check below outlives it by accident.
const LONG: Duration = Duration::from_secs(60);

fn leases_of(store: &Arc<dyn Store>) -> Arc<dyn Leases> {
    store
        .leases()
        .expect("the store under test keeps leases (Store::leases returned None)")
}

async fn granted(leases: &dyn Leases, k: &crate::key::SessionKey, me: &Claimant) -> Lease {
    match leases.acquire(k, me, LONG).await.expect("acquire") {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("{k}: expected a grant for {me:?}, held by {owner:?}"),
    }
}

/// One instance holds a session at a time: a second claimant learns who holds it (address and
/// epoch); the holder's fenced writes go through, anyone else's are refused and leave nothing.
pub async fn one_holder_at_a_time_and_only_its_writes_commit(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let k = key("leases", "one-holder");
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));
    let lease = granted(leases_of(&a).as_ref(), &k, &pa).await;
    match leases_of(&b).acquire(&k, &pb, LONG).await.expect("acquire") {
        Claim::Held(owner) => {
            assert_eq!(owner.address, "http://a");
            assert_eq!(owner.instance, pa.instance);
            assert_eq!(owner.epoch, lease.epoch);
        }
        Claim::Granted(lease) => panic!("a held lease was granted again: {lease:?}"),
    }
    let owner = leases_of(&b).owner(&k).await.expect("owner");
    assert_eq!(owner.map(|o| o.address).as_deref(), Some("http://a"));

    let v1 = a
        .append_fenced(&k, 0, &turn_events(1, "by the holder", None), &lease)
        .await
        .expect("the holder's fenced write commits");
    let forged = Lease {
        token: "not-the-token".to_owned(),
        epoch: lease.epoch,
    };
    match b
        .append_fenced(&k, v1, &turn_events(3, "forged", None), &forged)
        .await
    {
        Err(StoreError::NotOwner { owner, .. }) => {
            assert_eq!(owner.map(|o| o.address).as_deref(), Some("http://a"));
        }
        other => panic!("a write without the lease must be NotOwner, got {other:?}"),
    }
    let loaded = b.load(&k, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, v1, "nothing written");
    assert_eq!(loaded.events.len(), 2);
}

/// After a release, the next claimant gets a larger epoch, and the former holder's writes with
/// its old lease are refused, also when their version is the current one; a release of a lease
/// that is no longer the caller's leaves the new holder's lease alone.
pub async fn a_former_holder_can_never_commit(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let k = key("leases", "former");
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));
    let old = granted(leases_of(&a).as_ref(), &k, &pa).await;
    let v1 = a
        .append_fenced(&k, 0, &turn_events(1, "a1", None), &old)
        .await
        .expect("write");
    assert!(leases_of(&a).release(&k, &old).await.expect("release"));
    assert!(leases_of(&b).owner(&k).await.expect("owner").is_none());

    let new = granted(leases_of(&b).as_ref(), &k, &pb).await;
    assert!(new.epoch > old.epoch, "epochs grow: {old:?} then {new:?}");
    assert!(
        !leases_of(&a).release(&k, &old).await.expect("release"),
        "a stale release reports that the lease was not its own"
    );
    // The token is checked first: a lease that is no longer the session's is `NotOwner`
    // (naming the holder), whatever its epoch. `Fenced` is for a current token whose epoch is
    // below one that wrote (the stores' own tests lose the epoch counter to reach it).
    match a
        .append_fenced(&k, v1, &turn_events(3, "late a", None), &old)
        .await
    {
        Err(StoreError::NotOwner { owner, .. }) => {
            assert_eq!(owner.map(|o| o.address).as_deref(), Some("http://b"));
        }
        other => panic!("the former holder's write must be NotOwner, got {other:?}"),
    }
    let v2 = b
        .append_fenced(&k, v1, &turn_events(3, "b1", None), &new)
        .await
        .expect("the new holder's lease survived the stale release and its write commits");
    let loaded = a.load(&k, 10).await.expect("load");
    assert_eq!(loaded.record.expect("head").version, v2);
    let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(
        texts,
        ["a1", "re: a1", "b1", "re: b1"],
        "no trace of late a"
    );
}

/// An instance that claims a lease it already holds (its release failed, say) gets a fresh one,
/// and the lease it held before can no longer write.
pub async fn the_same_instance_takes_its_own_lease_over(store: Arc<dyn Store>) {
    let k = key("leases", "takeover");
    let me = Claimant::new("http://a");
    let leases = leases_of(&store);
    let first = granted(leases.as_ref(), &k, &me).await;
    let second = granted(leases.as_ref(), &k, &me).await;
    assert_ne!(first.token, second.token);
    assert!(second.epoch > first.epoch);
    match store
        .append_fenced(&k, 0, &turn_events(1, "old", None), &first)
        .await
    {
        Err(StoreError::NotOwner { .. }) => {}
        other => panic!("the replaced lease must be NotOwner, got {other:?}"),
    }
    store
        .append_fenced(&k, 0, &turn_events(1, "new", None), &second)
        .await
        .expect("the new lease writes");
}

/// Renewal answers per lease, in order; a renewed lease is still held, a released one is not.
/// Epochs keep growing after the session is deleted.
pub async fn renewal_is_per_lease_and_epochs_survive_deletion(store: Arc<dyn Store>) {
    let (k1, k2) = (key("leases", "r1"), key("leases", "r2"));
    let me = Claimant::new("http://a");
    let leases = leases_of(&store);
    let l1 = granted(leases.as_ref(), &k1, &me).await;
    let l2 = granted(leases.as_ref(), &k2, &me).await;
    store
        .append_fenced(&k2, 0, &turn_events(1, "x", None), &l2)
        .await
        .expect("write");
    assert!(leases.release(&k2, &l2).await.expect("release"));
    let renewed = leases
        .renew(&[(k1.clone(), l1.clone()), (k2.clone(), l2.clone())], LONG)
        .await
        .expect("renew");
    assert_eq!(renewed, [Renewal::Renewed, Renewal::Lost]);
    assert!(leases.owner(&k1).await.expect("owner").is_some());
    assert!(leases.owner(&k2).await.expect("owner").is_none());

    assert!(store.delete(&k2).await.expect("delete"));
    let again = granted(leases.as_ref(), &k2, &me).await;
    assert!(again.epoch > l2.epoch, "{again:?} after {l2:?}");
    assert!(leases
        .renew(&[], LONG)
        .await
        .expect("an empty batch")
        .is_empty());
}

/// A lease that is not renewed expires: another claimant then gets it, and the lapsed holder
/// can neither renew nor write. Waits for real time (a short TTL), polling with a deadline.
pub async fn an_unrenewed_lease_expires(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let k = key("leases", "expiry");
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));
    let ttl = Duration::from_millis(300);
    let lapsed = match leases_of(&a).acquire(&k, &pa, ttl).await.expect("acquire") {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let taken = loop {
        match leases_of(&b).acquire(&k, &pb, LONG).await.expect("acquire") {
            Claim::Granted(lease) => break lease,
            Claim::Held(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "a lease with a {ttl:?} TTL was still held after 10 s"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(taken.epoch > lapsed.epoch);
    let renewed = leases_of(&a)
        .renew(&[(k.clone(), lapsed.clone())], LONG)
        .await
        .expect("renew");
    assert_eq!(renewed, [Renewal::Lost], "a lapsed lease cannot be renewed");
    assert!(a
        .append_fenced(&k, 0, &turn_events(1, "lapsed", None), &lapsed)
        .await
        .is_err());
    assert!(b.load(&k, 10).await.expect("load").record.is_none());
}

/// A claim that reads the session ([`Leases::acquire_and_load`]) reads, when granted, exactly
/// what a load reads (or nothing: then the caller loads); when refused, it reads nothing.
pub async fn a_claim_reads_what_a_load_reads_and_only_when_granted(
    a: Arc<dyn Store>,
    b: Arc<dyn Store>,
) {
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));
    let fresh = key("leases", "claim-fresh");
    match leases_of(&a)
        .acquire_and_load(&fresh, &pa, LONG, 8)
        .await
        .expect("claim a session never stored")
    {
        (Claim::Granted(_), Some(loaded)) => {
            assert_eq!(loaded.record, None, "nothing is stored yet");
            assert!(loaded.events.is_empty());
        }
        (Claim::Granted(_), None) => {}
        (Claim::Held(owner), _) => panic!("a free session was held by {owner:?}"),
    }

    let k = key("leases", "claim-stored");
    let delta: crate::state::StateDelta = [("user:tone".to_owned(), serde_json::json!("dry"))]
        .into_iter()
        .collect();
    let mut version = 0;
    for turn in 0..3 {
        let seq = turn * 2 + 1;
        let changes = (turn == 1).then(|| delta.clone());
        version = a
            .append(&k, version, &turn_events(seq, &format!("t{turn}"), changes))
            .await
            .expect("append");
    }
    let expected = b.load(&k, 4).await.expect("load");
    match leases_of(&b)
        .acquire_and_load(&k, &pb, LONG, 4)
        .await
        .expect("claim")
    {
        (Claim::Granted(_), Some(loaded)) => {
            assert_eq!(loaded, expected, "a claim reads what a load reads");
            assert_eq!(loaded.events.len(), 4, "the window asked for");
        }
        (Claim::Granted(_), None) => {}
        (Claim::Held(owner), _) => panic!("a free session was held by {owner:?}"),
    }
    match leases_of(&a)
        .acquire_and_load(&k, &pa, LONG, 4)
        .await
        .expect("claim")
    {
        (Claim::Held(owner), read) => {
            assert_eq!(owner.address, "http://b");
            assert!(read.is_none(), "a refused claim reads nothing: {read:?}");
        }
        (Claim::Granted(lease), _) => panic!("a held lease was granted again: {lease:?}"),
    }
}
