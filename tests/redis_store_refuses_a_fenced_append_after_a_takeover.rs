//! Fencing on Redis: once another process has taken a session's lease over (the first one's
//! lapsed), the first process's fenced append is refused with `NotOwner` naming the new owner,
//! and stores nothing — every key under the prefix is byte-for-byte unchanged. And should a
//! lease ever be granted with an epoch below one that has already written (the epoch counter
//! lost, say), the head's record of the newest writing epoch refuses it with `Fenced`.
//!
//! Breakage caught (verified by hand): `append.lua` without its lease check lets the former
//! owner's write commit.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use turnstile::backend::{RedisOptions, RedisStore};
use turnstile::store::conformance::turn_events;
use turnstile::store::{Claim, Claimant, Lease, Leases};
use turnstile::{SessionKey, Store, StoreError};

use support::harness::eventually_ok;
use support::redis_server::{dump, fresh_prefix, RedisServer};

async fn grant(store: &RedisStore, key: &SessionKey, me: &Claimant, ttl: Duration) -> Lease {
    match store.acquire(key, me, ttl).await.expect("acquire") {
        Claim::Granted(lease) => lease,
        Claim::Held(owner) => panic!("held by {owner:?}"),
    }
}

#[tokio::test]
async fn a_former_owner_commits_nothing_after_a_takeover() {
    let server = RedisServer::start();
    let prefix = fresh_prefix();
    let options = RedisOptions::default().with_prefix(prefix.clone());
    let a = server.store_with(options.clone()).await;
    let b = server.store_with(options.clone()).await;
    let mut conn = server.connection().await;
    let key = SessionKey::new("ann", "s").expect("key");
    let (pa, pb) = (Claimant::new("http://a"), Claimant::new("http://b"));

    let old = grant(&a, &key, &pa, Duration::from_millis(200)).await;
    let v1 = a
        .append_fenced(&key, 0, &turn_events(1, "by a", None), &old)
        .await
        .expect("a holds the lease");
    let new = eventually_ok(
        "a's lease to expire and b to take it",
        Duration::from_millis(50),
        || async {
            match b.acquire(&key, &pb, Duration::from_secs(60)).await {
                Ok(Claim::Granted(lease)) => Ok(lease),
                Ok(Claim::Held(owner)) => Err(format!("held by {owner:?}")),
                Err(e) => panic!("acquire: {e}"),
            }
        },
    )
    .await;
    let v2 = b
        .append_fenced(&key, v1, &turn_events(3, "by b", None), &new)
        .await
        .expect("b holds the lease now");

    let before = dump(&mut conn, &prefix).await;
    // a's cached head is at v1, so this is its honest next write; and one on the current
    // version, as if a had seen b's write.
    for (base, seq) in [(v1, 3), (v2, 5)] {
        match a
            .append_fenced(&key, base, &turn_events(seq, "late a", None), &old)
            .await
        {
            Err(StoreError::NotOwner { owner, .. }) => {
                let owner = owner.expect("the new owner is named");
                assert_eq!(
                    (owner.address.as_str(), owner.epoch),
                    ("http://b", new.epoch)
                );
            }
            other => panic!("the former owner must be refused, got {other:?}"),
        }
    }
    // A process that never saw the session (nothing cached) with a stale version: still
    // `NotOwner`, not a `Conflict` that would send it reloading and retrying.
    let fresh = server.store_with(options).await;
    match fresh
        .append_fenced(&key, v1, &turn_events(3, "stale", None), &old)
        .await
    {
        Err(StoreError::NotOwner { .. }) => {}
        other => panic!("a former owner must hear NotOwner, got {other:?}"),
    }
    assert_eq!(dump(&mut conn, &prefix).await, before, "nothing was stored");

    // The fence in the head: b's epoch wrote; a lease granted below it is refused.
    assert!(b.release(&key, &new).await.expect("release"));
    let counters: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:s:*:epoch"))
        .query_async(&mut conn)
        .await
        .expect("KEYS");
    assert_eq!(counters.len(), 1, "{counters:?}");
    let _: i64 = redis::cmd("DEL")
        .arg(&counters[0])
        .query_async(&mut conn)
        .await
        .expect("DEL");
    let low = grant(&a, &key, &pa, Duration::from_secs(60)).await;
    assert!(low.epoch < new.epoch, "{low:?} vs {new:?}");
    let before = dump(&mut conn, &prefix).await;
    match a
        .append_fenced(&key, v2, &turn_events(5, "low epoch", None), &low)
        .await
    {
        Err(StoreError::Fenced { epoch, current, .. }) => {
            assert_eq!((epoch, current), (low.epoch, new.epoch));
        }
        other => panic!("a lower epoch than the head's must be Fenced, got {other:?}"),
    }
    assert_eq!(dump(&mut conn, &prefix).await, before, "nothing was stored");
    let loaded = a.load(&key, 10).await.expect("load");
    let texts: Vec<_> = loaded.events.iter().filter_map(|e| e.text()).collect();
    assert_eq!(texts, ["by a", "re: by a", "by b", "re: by b"]);
}
